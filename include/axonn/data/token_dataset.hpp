// data/token_dataset.hpp — llm.c token shards, memory-mapped, and a sequential batch loader.
//
// A shard is a 256 x int32 header (magic 20240520 with uint16 tokens, version 1; or 20240801 with
// uint32 tokens, version 7; then the token count) followed by the tokens (spec/formats.md).
//
//   data::TokenShard shard("train.bin", vocab_size);   // validates header, size and every token
//   data::BatchLoader loader(shard, B, T);
//   loader.next(inputs, targets);                       // B*T ids each; targets shifted by one
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace axonn::data {

constexpr int kGpt2TokensMagic = 20240520;
constexpr int kLlama3TokensMagic = 20240801;

class TokenShard {
 public:
  // Maps the file and checks it: header, exact size, and (when vocab_size > 0) that every token id
  // is below vocab_size. Throws IoError naming the file and the problem.
  TokenShard(const std::string& path, int vocab_size);
  // A shard held in memory (generated data); path() is "<in memory>".
  explicit TokenShard(std::vector<uint32_t> tokens);
  ~TokenShard();
  TokenShard(const TokenShard&) = delete;
  TokenShard& operator=(const TokenShard&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return num_tokens_; }
  int token(int64_t i) const {
    return token_bytes_ == 2 ? static_cast<const uint16_t*>(tokens_)[i] : static_cast<int>(static_cast<const uint32_t*>(tokens_)[i]);
  }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  int64_t num_tokens_ = 0;
  int token_bytes_ = 2;
  std::vector<uint32_t> owned_;
};

// A corpus the project makes itself: a sparse random Markov chain over `vocab` ids, each with four
// likely successors (90%) and a uniformly random token otherwise, so a model can learn it and its
// loss falls. Deterministic in `seed`.
std::vector<uint32_t> synthetic_markov_tokens(int vocab, int64_t n, uint64_t seed);

// Reads batches sequentially as llm.c's loader does: batch i is tokens [p, p + B*T + 1) with
// p = i*B*T, inputs the first B*T and targets the same shifted by one; when the next window would
// run past the end, it wraps to the start of the shard.
class BatchLoader {
 public:
  BatchLoader(const TokenShard& shard, int B, int T);
  void next(int* inputs, int* targets);
  // Token offset of the next batch (the loader's whole state, for resuming).
  int64_t position() const { return position_; }
  void set_position(int64_t p);

 private:
  const TokenShard& shard_;
  int64_t window_;  // B*T
  int64_t position_ = 0;
};

}  // namespace axonn::data
