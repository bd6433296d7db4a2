// data/token_dataset.hpp — llm.c token shards, memory-mapped; many of them as one corpus; and the
// batch loader over it (sequential as llm.c's, or shuffled with a seed; resumable exactly).
//
// A shard is a 256 x int32 header (magic 20240520 with uint16 tokens, version 1; or 20240801 with
// uint32 tokens, version 7; then the token count) followed by the tokens (spec/formats.md).
//
//   data::TokenCorpus corpus(data::find_shards("data/"), vocab_size);  // validates every shard
//   data::BatchLoader loader(corpus, B, T, {.shuffle = true, .seed = 7});
//   loader.next(inputs, targets);                       // B*T ids each; targets shifted by one
#pragma once

#include <cstdint>
#include <memory>
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
  uint64_t bytes() const { return map_bytes_; }  // the file's size when it was opened (0: in memory)
  // xxh3 of the file (header and tokens) or of samples of it: TokenCorpus::fingerprint.
  uint64_t content_hash() const;
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

// What differs between two fingerprints (TokenCorpus::fingerprint), said for a person: "shard
// 'train_000001.bin' is 1048576 bytes, was 2097152; shard 'train_000002.bin' is missing"; empty when
// they are the same.
std::string fingerprint_difference(const std::string& recorded, const std::string& now);

// A corpus the project makes itself: a sparse random Markov chain over `vocab` ids, each with four
// likely successors (90%) and a uniformly random token otherwise, so a model can learn it and its
// loss falls. Deterministic in `seed`.
std::vector<uint32_t> synthetic_markov_tokens(int vocab, int64_t n, uint64_t seed);

// The shards a --data value names: a file; a glob ("data/train_*.bin", matches sorted by name); or
// a directory, whose *.bin files of the split are taken in name order (kTrain: names without "val",
// kVal: names with "val", as `axonn prepare` and llm.c's data scripts name them). Throws IoError when
// nothing matches.
enum class ShardSplit { kTrain, kVal };
std::vector<std::string> find_shards(const std::string& spec, ShardSplit split = ShardSplit::kTrain);

// Several shards read as one corpus: its tokens are the shards' tokens one after the other, and a
// token's global index counts from the first shard's first token.
class TokenCorpus {
 public:
  // Opens and checks every shard (TokenShard) before anything else happens.
  TokenCorpus(const std::vector<std::string>& paths, int vocab_size);
  explicit TokenCorpus(std::unique_ptr<TokenShard> shard);  // one shard, e.g. generated in memory

  size_t num_shards() const { return shards_.size(); }
  const TokenShard& shard(size_t i) const { return *shards_[i]; }
  int64_t num_tokens() const { return starts_.back(); }
  // Global index of shard i's first token.
  int64_t shard_start(size_t i) const { return starts_[i]; }
  int token(int64_t global) const;
  // Where each document begins (the global index of its separator token, the convention of llm.c's
  // shards and `axonn prepare`), in order; document d is [starts[d], starts[d+1]) and the last runs
  // to the end. Tokens before the first separator belong to no document.
  std::vector<int64_t> document_starts(int separator) const;
  // "data/train_000000.bin" or "3 shards, data/train_000000.bin .. data/train_000002.bin".
  std::string describe() const;
  // What a checkpoint records of its data, to tell on resume whether the data changed: per shard, its
  // file name, size and a hash (xxh3) of its header and tokens (the whole shard up to 16 MiB, else
  // its header and 16 evenly spaced samples of 64 KiB: a shard re-prepared, edited or replaced
  // differs). One line per shard, "NAME BYTES HASH".
  std::string fingerprint() const;

 private:
  std::vector<std::unique_ptr<TokenShard>> shards_;
  std::vector<int64_t> starts_;  // shards_.size() + 1 prefix sums
};

struct LoaderOptions {
  bool shuffle = false;  // a new order of the sequences every epoch
  uint64_t seed = 0;     // the order's seed (--data-seed)
};

// Global batches of B sequences of T tokens, with the targets shifted by one.
//
// Each shard is cut into sequences of T+1 tokens at offsets 0, T, 2T, ... (sequence j of a shard of
// n tokens is tokens [jT, jT+T+1) for j < floor((n-1)/T); no sequence crosses a shard boundary). An
// epoch takes U = floor(S/B)·B of the corpus's S sequences, B per batch: in corpus order, or, with
// shuffle, the first U of a pseudo-random permutation of all S that depends only on (seed, epoch,
// S): a keyed Feistel bijection, so no table is stored. The n-th sequence consumed is therefore a
// pure function of n: position() is the count of sequences consumed, and set_position(n) resumes
// exactly there, in any shard and epoch. Every rank reads the same global batches whatever the grid.
//
// One shard, no shuffle, is llm.c's sequential loader exactly: batch i starts at token
// (i mod K)·B·T, K = floor((n-1)/(B·T)), and wraps to the start when the next window would pass the end.
class BatchLoader {
 public:
  BatchLoader(const TokenCorpus& corpus, int B, int T, LoaderOptions options = {});
  // One shard (tests, benchmarks).
  BatchLoader(const TokenShard& shard, int B, int T);

  // inputs and targets: B*T ids each, sequence b at [b*T, (b+1)*T).
  void next(int* inputs, int* targets);
  // Sequences consumed so far (the loader's whole state, for resuming).
  int64_t position() const { return position_; }
  void set_position(int64_t sequences);
  // Global index (TokenCorpus) of the first token of each sequence of the last batch: with
  // document_starts() it tells which document each position of the batch belongs to.
  const std::vector<int64_t>& last_batch_starts() const { return last_starts_; }
  int64_t sequences() const { return total_sequences_; }   // S
  int64_t sequences_per_epoch() const { return per_epoch_; }  // U
  // Corpus-global index of the first token of the n-th sequence consumed.
  int64_t sequence_start(int64_t n) const;

 private:
  struct Where {
    size_t shard;
    int64_t offset;  // of the sequence's first token in the shard
  };
  void init();
  Where locate(int64_t n) const;  // the n-th sequence consumed

  std::vector<const TokenShard*> shards_;
  std::vector<int64_t> shard_token_starts_;  // global index of each shard's first token
  std::vector<int64_t> seq_starts_;          // prefix sums of the shards' sequence counts
  int B_, T_;
  LoaderOptions options_;
  int64_t total_sequences_ = 0, per_epoch_ = 0, position_ = 0;
  std::vector<int64_t> last_starts_;
};

}  // namespace axonn::data
