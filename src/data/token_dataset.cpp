#include "axonn/data/token_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "axonn/core/error.hpp"
#include "axonn/core/input_file.hpp"

namespace axonn::data {

namespace {
constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);
}

TokenShard::TokenShard(const std::string& path, int vocab_size) : path_(path) {
  int fd = open_input_file(path, "token shard");  // (a named pipe is refused, not waited on)
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw IoError("cannot stat token shard '" + path + "': " + std::strerror(err));
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ < kHeaderBytes) {
    ::close(fd);
    throw IoError("token shard '" + path + "' is " + std::to_string(map_bytes_) +
                  " bytes, shorter than the 1024-byte llm.c header");
  }
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  AXONN_CHECK_IO(map_ != MAP_FAILED, "cannot map token shard '", path, "': ", std::strerror(errno));
  try {
    const auto* h = static_cast<const int32_t*>(map_);
    if (h[0] == kGpt2TokensMagic) {
      AXONN_CHECK_IO(h[1] == 1, "token shard '", path, "' has version ", h[1], "; GPT-2 shards are version 1");
      token_bytes_ = 2;
    } else if (h[0] == kLlama3TokensMagic) {
      AXONN_CHECK_IO(h[1] == 7, "token shard '", path, "' has version ", h[1], "; Llama-3 shards are version 7");
      token_bytes_ = 4;
    } else {
      throw IoError("token shard '" + path + "' has magic " + std::to_string(h[0]) + ", not llm.c's " +
                    std::to_string(kGpt2TokensMagic) + " (GPT-2) or " + std::to_string(kLlama3TokensMagic) +
                    " (Llama-3); is it a token file written by llm.c's data scripts or `axonn prepare`?");
    }
    num_tokens_ = h[2];
    AXONN_CHECK_IO(num_tokens_ > 0, "token shard '", path, "' declares ", num_tokens_, " tokens");
    size_t expected = kHeaderBytes + static_cast<size_t>(num_tokens_) * static_cast<size_t>(token_bytes_);
    AXONN_CHECK_IO(map_bytes_ == expected, "token shard '", path, "' is ", map_bytes_, " bytes but its header says ",
                   num_tokens_, " tokens (", expected, " bytes): the file is ",
                   map_bytes_ < expected ? "truncated" : "longer than its header says");
    tokens_ = static_cast<const char*>(map_) + kHeaderBytes;
    if (vocab_size > 0) {
      // unsigned: a 32-bit id of 2^31 or more is no negative number
      const auto V = static_cast<uint32_t>(vocab_size);
      for (int64_t i = 0; i < num_tokens_; i++) {
        const uint32_t t = token_bytes_ == 2 ? static_cast<const uint16_t*>(tokens_)[i]
                                             : static_cast<const uint32_t*>(tokens_)[i];
        AXONN_CHECK_IO(t < V, "token shard '", path, "' holds token id ", t, " at position ", i,
                       ", outside the model's vocabulary of ", vocab_size,
                       "; was it tokenised for another model?");
      }
    }
  } catch (...) {
    ::munmap(map_, map_bytes_);
    throw;
  }
}

TokenShard::TokenShard(std::vector<uint32_t> tokens)
    : path_("<in memory>"), num_tokens_(static_cast<int64_t>(tokens.size())), token_bytes_(4),
      owned_(std::move(tokens)) {
  tokens_ = owned_.data();
}

std::vector<uint32_t> synthetic_markov_tokens(int vocab, int64_t n, uint64_t seed) {
  AXONN_CHECK_ARG(vocab > 0 && n > 0, "synthetic corpus needs a vocabulary and a length");
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&s] {  // xorshift64*
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return static_cast<uint32_t>((s * 0x2545F4914F6CDD1Dull) >> 32);
  };
  auto V = static_cast<uint32_t>(vocab);
  std::vector<uint32_t> succ(static_cast<size_t>(V) * 4);
  for (auto& x : succ) x = next() % V;
  std::vector<uint32_t> tokens(static_cast<size_t>(n));
  uint32_t t = 0;
  for (auto& x : tokens) {
    x = t;
    uint32_t r = next();
    t = (r % 10 < 9) ? succ[t * 4 + (r >> 8) % 4] : (r >> 8) % V;
  }
  return tokens;
}

uint64_t TokenShard::content_hash() const {
  const auto* bytes = static_cast<const unsigned char*>(map_ ? map_ : static_cast<const void*>(owned_.data()));
  const size_t n = map_ ? map_bytes_ : owned_.size() * sizeof(uint32_t);
  constexpr size_t kWhole = 16u << 20, kSample = 64u << 10, kSamples = 16;
  if (n <= kWhole) return XXH3_64bits(bytes, n);
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, bytes, kHeaderBytes);
  for (size_t i = 0; i < kSamples; i++) {
    const size_t at = kHeaderBytes + (n - kHeaderBytes - kSample) / (kSamples - 1) * i;
    XXH3_64bits_update(state, bytes + at, kSample);
  }
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h;
}

TokenShard::~TokenShard() {
  if (map_) ::munmap(map_, map_bytes_);
}

}  // namespace axonn::data
