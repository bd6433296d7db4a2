#include <glob.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "axonn/core/error.hpp"
#include "axonn/core/random.hpp"
#include "axonn/data/token_dataset.hpp"

namespace axonn::data {

namespace {

namespace fs = std::filesystem;

// A pseudo-random bijection of [0, n), keyed by (seed, epoch): a 4-round Feistel network on the
// smallest even number of bits that covers n, with cycle walking (apply again until the value is
// below n: still a bijection, and at most 4 rounds of walking are expected since 4^h < 4n).
class Permutation {
 public:
  Permutation(uint64_t n, uint64_t seed, uint64_t epoch) : n_(n) {
    while ((uint64_t{1} << (2 * half_)) < n) half_++;
    mask_ = (uint64_t{1} << half_) - 1;
    for (int r = 0; r < kRounds; r++) keys_[r] = splitmix64(seed ^ splitmix64(epoch * kRounds + static_cast<uint64_t>(r)));
  }
  uint64_t operator()(uint64_t i) const {
    uint64_t x = i;
    do {
      uint64_t left = x >> half_, right = x & mask_;
      for (uint64_t key : keys_) {
        const uint64_t mixed = left ^ (splitmix64(right ^ key) & mask_);
        left = right;
        right = mixed;
      }
      x = (left << half_) | right;
    } while (x >= n_);
    return x;
  }

 private:
  static constexpr int kRounds = 4;
  uint64_t n_, mask_ = 0, keys_[kRounds] = {};
  int half_ = 0;
};

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

std::vector<std::string> find_shards(const std::string& spec, ShardSplit split) {
  AXONN_CHECK_ARG(!spec.empty(), "no token shards given");
  std::vector<std::string> out;
  std::error_code ec;
  if (has_glob_chars(spec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) out.emplace_back(g.gl_pathv[i]);  // sorted by glob
    ::globfree(&g);
    AXONN_CHECK_IO(!out.empty(), "no token shards match '", spec, "'");
    return out;
  }
  if (!fs::is_directory(spec, ec)) return {spec};  // one file (TokenShard says if it is missing)
  const bool want_val = split == ShardSplit::kVal;
  for (const auto& e : fs::directory_iterator(spec, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".bin" && (name.find("val") != std::string::npos) == want_val)
      out.push_back(e.path().string());
  }
  AXONN_CHECK_IO(!ec, "cannot read directory '", spec, "': ", ec.message());
  AXONN_CHECK_IO(!out.empty(), "directory '", spec, "' has no ", want_val ? "validation" : "training",
                 " token shards (*.bin files whose name ", want_val ? "contains" : "lacks",
                 " 'val'); write some with axonn prepare");
  std::sort(out.begin(), out.end());
  return out;
}

TokenCorpus::TokenCorpus(const std::vector<std::string>& paths, int vocab_size) : starts_{0} {
  AXONN_CHECK_IO(!paths.empty(), "no token shards given");
  for (const auto& p : paths) {
    shards_.push_back(std::make_unique<TokenShard>(p, vocab_size));
    starts_.push_back(starts_.back() + shards_.back()->size());
  }
}

TokenCorpus::TokenCorpus(std::unique_ptr<TokenShard> shard) : starts_{0, shard->size()} {
  shards_.push_back(std::move(shard));
}

int TokenCorpus::token(int64_t global) const {
  AXONN_CHECK(global >= 0 && global < num_tokens(), "token ", global, " outside the corpus of ", num_tokens());
  const size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), global) - starts_.begin()) - 1;
  return shards_[s]->token(global - starts_[s]);
}

std::vector<int64_t> TokenCorpus::document_starts(int separator) const {
  std::vector<int64_t> starts;
  for (size_t s = 0; s < shards_.size(); s++)
    for (int64_t i = 0; i < shards_[s]->size(); i++)
      if (shards_[s]->token(i) == separator) starts.push_back(starts_[s] + i);
  return starts;
}

std::string TokenCorpus::fingerprint() const {
  std::string text;
  char hash[17];
  for (const auto& shard : shards_) {
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(shard->content_hash()));
    text += fs::path(shard->path()).filename().string() + " " + std::to_string(shard->bytes()) + " " + hash + "\n";
  }
  return text;
}

namespace {

struct ShardPrint {
  std::string name, bytes, hash;
};

std::vector<ShardPrint> parse_fingerprint(const std::string& text) {
  std::vector<ShardPrint> shards;
  std::istringstream in(text);
  ShardPrint p;
  while (in >> p.name >> p.bytes >> p.hash) shards.push_back(p);
  return shards;
}

}  // namespace

std::string fingerprint_difference(const std::string& recorded, const std::string& now) {
  const std::vector<ShardPrint> was = parse_fingerprint(recorded), is = parse_fingerprint(now);
  std::string diff;
  const auto say = [&diff](const std::string& what) { diff += (diff.empty() ? "" : "; ") + what; };
  if (was.size() != is.size())
    say(std::to_string(is.size()) + " shard" + (is.size() == 1 ? "" : "s") + ", was " + std::to_string(was.size()));
  for (size_t i = 0; i < std::min(was.size(), is.size()); i++) {
    const ShardPrint &a = was[i], &b = is[i];
    if (a.name != b.name)
      say("shard " + std::to_string(i + 1) + " is '" + b.name + "', was '" + a.name + "'");
    else if (a.bytes != b.bytes)
      say("shard '" + b.name + "' is " + b.bytes + " bytes, was " + a.bytes);
    else if (a.hash != b.hash)
      say("shard '" + b.name + "' holds other tokens (same size)");
  }
  return diff;
}

std::string TokenCorpus::describe() const {
  if (shards_.size() == 1) return shards_[0]->path();
  return std::to_string(shards_.size()) + " shards, " + shards_.front()->path() + " .. " + shards_.back()->path();
}

BatchLoader::BatchLoader(const TokenCorpus& corpus, int B, int T, LoaderOptions options)
    : B_(B), T_(T), options_(options) {
  for (size_t i = 0; i < corpus.num_shards(); i++) {
    shards_.push_back(&corpus.shard(i));
    shard_token_starts_.push_back(corpus.shard_start(i));
  }
  init();
}

BatchLoader::BatchLoader(const TokenShard& shard, int B, int T) : B_(B), T_(T) {
  shards_.push_back(&shard);
  shard_token_starts_.push_back(0);
  init();
}

void BatchLoader::init() {
  AXONN_CHECK_ARG(B_ > 0 && T_ > 0, "batch size and sequence length must be positive, got B=", B_, " T=", T_);
  seq_starts_.assign(1, 0);
  for (const TokenShard* s : shards_) seq_starts_.push_back(seq_starts_.back() + std::max<int64_t>(0, (s->size() - 1) / T_));
  total_sequences_ = seq_starts_.back();
  per_epoch_ = total_sequences_ / B_ * B_;
  const int64_t window = static_cast<int64_t>(B_) * T_;
  if (shards_.size() == 1) {
    AXONN_CHECK_ARG(per_epoch_ > 0, "token shard '", shards_[0]->path(), "' has ", shards_[0]->size(),
                    " tokens, fewer than one batch needs (B*T+1 = ", window + 1,
                    "); use a smaller --batch-size or --seq-len, or more data");
  } else {
    AXONN_CHECK_ARG(per_epoch_ > 0, "the ", shards_.size(), " token shards hold ", total_sequences_,
                    " sequences of T+1 = ", T_ + 1, " tokens (no sequence crosses a shard), fewer than one batch of B = ",
                    B_, "; use a smaller --batch-size or --seq-len, or more data");
  }
  last_starts_.assign(static_cast<size_t>(B_), 0);
}

void BatchLoader::set_position(int64_t sequences) {
  AXONN_CHECK_ARG(sequences >= 0, "loader position ", sequences, " is negative");
  position_ = sequences;
}

BatchLoader::Where BatchLoader::locate(int64_t n) const {
  const int64_t epoch = n / per_epoch_, k = n % per_epoch_;
  int64_t g = k;  // the sequence's index in corpus order
  if (options_.shuffle) {
    const Permutation order(static_cast<uint64_t>(total_sequences_), options_.seed, static_cast<uint64_t>(epoch));
    g = static_cast<int64_t>(order(static_cast<uint64_t>(k)));
  }
  const auto s = static_cast<size_t>(std::upper_bound(seq_starts_.begin(), seq_starts_.end(), g) - seq_starts_.begin() - 1);
  return {s, (g - seq_starts_[s]) * T_};
}

int64_t BatchLoader::sequence_start(int64_t n) const {
  const Where w = locate(n);
  return shard_token_starts_[w.shard] + w.offset;
}

namespace {

// A shard is memory-mapped: when its file shrinks while the run reads it (rewritten, truncated), a
// read past the new end raises SIGBUS. Around the loader's reads that signal returns here (the jump
// armed by this thread) and becomes a clear error; anywhere else it keeps its default action.
thread_local sigjmp_buf* t_bus_jump = nullptr;

void on_sigbus(int sig) {
  if (t_bus_jump) siglongjmp(*t_bus_jump, 1);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void catch_sigbus_once() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    return ::sigaction(SIGBUS, &sa, nullptr) == 0;
  }();
  (void)installed;
}

// "1048576 bytes when it was opened, 4096 now" (or "is gone now").
std::string size_change(const TokenShard& shard) {
  struct stat st {};
  const std::string now = ::stat(shard.path().c_str(), &st) == 0 ? std::to_string(st.st_size) + " now" : "gone now";
  return std::to_string(shard.bytes()) + " bytes when the run opened it, " + now;
}

}  // namespace

void BatchLoader::next(int* inputs, int* targets) {
  catch_sigbus_once();
  sigjmp_buf jump;
  volatile size_t reading = 0;  // the shard being read, for the message (survives the jump)
  if (sigsetjmp(jump, 1) != 0) {
    t_bus_jump = nullptr;
    const TokenShard& shard = *shards_[reading];
    throw IoError("token shard '" + shard.path() + "' changed while the run read it (" + size_change(shard) +
                  "): the data of a run must not change under it. Nothing of this step was trained; resume from the "
                  "last checkpoint once the shard is whole again (or with the new data and --allow-data-change)");
  }
  t_bus_jump = &jump;
  for (int b = 0; b < B_; b++) {
    const Where w = locate(position_ + b);
    reading = w.shard;
    const TokenShard& shard = *shards_[w.shard];
    int* in = inputs + static_cast<int64_t>(b) * T_;
    int* tg = targets + static_cast<int64_t>(b) * T_;
    for (int64_t i = 0; i < T_; i++) {
      in[i] = shard.token(w.offset + i);
      tg[i] = shard.token(w.offset + i + 1);
    }
    last_starts_[static_cast<size_t>(b)] = shard_token_starts_[w.shard] + w.offset;
  }
  t_bus_jump = nullptr;
  position_ += B_;
}

}  // namespace axonn::data
