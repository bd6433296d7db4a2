// data/shard_writer.hpp — writing llm.c token shards (the format TokenShard reads).
//
// Tokens are appended to `<dir>/<prefix>_000000.bin`, `_000001.bin`, ... each holding at most
// `shard_tokens` tokens: uint16 tokens (magic 20240520, version 1; GPT-2) or uint32 tokens (magic
// 20240801, version 7; llm.c's Llama 3 shards). A shard's header gets its token count when the shard
// is closed, then the file is fsynced; callers make a whole set appear at once by writing into a
// staging directory (data/prepare.hpp).
//
//   data::ShardWriter w(dir, "train", 2, 100'000'000);
//   w.append(tokens);
//   std::vector<std::string> files = w.finish();
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace axonn::data {

class ShardWriter {
 public:
  // token_bytes: 2 or 4; shard_tokens: 1 .. 2^31 - 1 (the header's count is an int32).
  ShardWriter(std::string dir, std::string prefix, int token_bytes, int64_t shard_tokens);
  // InvalidArgument unless 1 <= shard_tokens <= INT32_MAX (llm.c's header holds the count as an int32), naming
  // --shard-size: the constructor's check, for a caller that checks its options before it writes anything.
  static void check_shard_tokens(int64_t shard_tokens);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends tokens, starting new shards as they fill. Each id must fit the token width.
  void append(std::span<const uint32_t> tokens);
  // Closes the last shard; returns every shard's path, in order. No shard is written for no tokens.
  std::vector<std::string> finish();
  int64_t tokens() const { return total_; }

 private:
  void open_next();
  void close_current();

  std::string dir_, prefix_;
  int token_bytes_;
  int64_t shard_tokens_;
  FILE* f_ = nullptr;
  int64_t in_shard_ = 0, total_ = 0;
  std::vector<std::string> paths_;
  std::vector<char> buf_;
};

}  // namespace axonn::data
