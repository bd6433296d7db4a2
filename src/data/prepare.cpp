#include "axonn/data/prepare.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"
#include "axonn/data/shard_writer.hpp"

namespace axonn::data {

namespace {

namespace fs = std::filesystem;

// A batch is this much text (or this many documents), encoded by all threads at once.
constexpr size_t kBatchBytes = 8u << 20;
constexpr size_t kBatchDocuments = 8192;

// Removes the staging directory unless the preparation committed it.
struct Staging {
  std::string dir;
  bool committed = false;
  ~Staging() {
    if (committed) return;
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

void fsync_dir(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

struct Hash128 {
  size_t operator()(const XXH128_hash_t& h) const { return static_cast<size_t>(h.low64 ^ (h.high64 * 0x9E3779B97F4A7C15ull)); }
};
struct Equal128 {
  bool operator()(const XXH128_hash_t& a, const XXH128_hash_t& b) const { return XXH128_isEqual(a, b) != 0; }
};

// Encodes docs[i] into out[i] on `threads` threads (each takes the next document); the first error
// any thread meets is rethrown here, after all have stopped.
void encode_batch(const text::Tokenizer& tok, const std::vector<text::Document>& docs,
                  std::vector<std::vector<int>>& out, int threads) {
  out.assign(docs.size(), {});
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      for (size_t i; !failed && (i = next.fetch_add(1)) < docs.size();) out[i] = tok.encode_ordinary(docs[i].text);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  const int n = std::min<int>(threads, static_cast<int>(docs.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; t++) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

int token_bytes_for(const text::Tokenizer& tok, TokenType type) {
  const int V = tok.vocab_size();
  constexpr int kUint16Ids = 65535;  // ids 0..65534; llm.c keeps 65535 as a marker in its eval files
  switch (type) {
    case TokenType::kUint16:
      AXONN_CHECK_ARG(V <= kUint16Ids, "the vocabulary of ", tok.describe(), " has ", V,
                      " ids, more than uint16 tokens hold (65,535); use --token-type uint32 (llm.c's Llama 3 "
                      "shards) or auto");
      return 2;
    case TokenType::kUint32: return 4;
    case TokenType::kAuto: return V <= kUint16Ids ? 2 : 4;
  }
  return 4;
}

}  // namespace

TokenType parse_token_type(const std::string& s) {
  if (s == "auto") return TokenType::kAuto;
  if (s == "uint16") return TokenType::kUint16;
  if (s == "uint32") return TokenType::kUint32;
  throw InvalidArgument("--token-type must be auto, uint16 or uint32, got '" + s + "'");
}

PrepareResult prepare(const text::Tokenizer& tok, const PrepareOptions& o,
                      const std::function<void(const PrepareProgress&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  // options first: nothing is read or written for a run that cannot succeed
  AXONN_CHECK_ARG(o.val_fraction >= 0.0 && o.val_fraction < 1.0, "--val-fraction must be in [0, 1), got ",
                  o.val_fraction);
  AXONN_CHECK_ARG(tok.can_encode(), tok.describe(),
                  " can only decode; prepare needs a tokenizer that encodes (gpt2, tokenizer.json, vocab.json + "
                  "merges.txt, tokenizer.model)");
  const int separator = tok.document_separator();
  AXONN_CHECK_ARG(separator >= 0, tok.describe(), " has neither a BOS nor an end-of-text token to put between documents");
  PrepareResult r;
  r.token_bytes = token_bytes_for(tok, o.token_type);
  r.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  AXONN_CHECK_ARG(!o.output.empty(), "--output DIR is required");
  fs::path out = fs::path(o.output).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "data/" is "data"
  std::error_code ec;
  if (fs::exists(out, ec)) {
    AXONN_CHECK_ARG(fs::is_directory(out, ec), "--output '", o.output, "' exists and is not a directory");
    AXONN_CHECK_ARG(o.overwrite || fs::is_empty(out, ec), "--output '", o.output,
                    "' exists and is not empty; choose a new directory, or pass --overwrite to replace it");
  }
  text::DocumentReader reader(o.inputs, o.documents);  // every input exists and is readable

  Staging staging{out.string() + ".tmp"};
  fs::remove_all(staging.dir, ec);  // a stale one from a run that was killed
  fs::create_directories(staging.dir, ec);
  AXONN_CHECK_IO(!ec, "cannot create '", staging.dir, "': ", ec.message());
  ShardWriter train(staging.dir, "train", r.token_bytes, o.shard_tokens);
  ShardWriter val(staging.dir, "val", r.token_bytes, o.shard_tokens);

  std::unordered_set<XXH128_hash_t, Hash128, Equal128> seen;
  std::vector<text::Document> batch;
  std::vector<std::vector<int>> ids;
  std::vector<uint32_t> tokens;
  for (bool more = true; more;) {
    batch.clear();
    size_t bytes = 0;
    while (bytes < kBatchBytes && batch.size() < kBatchDocuments) {
      text::Document d;
      if (!(more = reader.next(d))) break;
      if (o.dedup && !seen.insert(XXH3_128bits(d.text.data(), d.text.size())).second) {
        r.duplicates_skipped++;
        continue;
      }
      bytes += d.text.size();
      batch.push_back(std::move(d));
    }
    encode_batch(tok, batch, ids, r.threads);
    for (size_t k = 0; k < batch.size(); k++) {
      const auto i = static_cast<double>(r.documents);
      const bool is_val = std::floor((i + 1) * o.val_fraction) > std::floor(i * o.val_fraction);
      tokens.assign(1, static_cast<uint32_t>(separator));
      tokens.insert(tokens.end(), ids[k].begin(), ids[k].end());
      (is_val ? val : train).append(tokens);
      r.documents++;
      r.val_documents += is_val;
      r.bytes += batch[k].text.size();
    }
    if (progress) progress({reader.bytes_read(), reader.total_bytes(), r.documents, train.tokens() + val.tokens(), elapsed()});
  }
  AXONN_CHECK_IO(r.documents > 0, "the inputs hold no text (every document is empty",
                 r.duplicates_skipped ? " or a duplicate" : "", ")");
  AXONN_CHECK_ARG(o.val_fraction == 0.0 || r.val_documents > 0, "--val-fraction ", o.val_fraction, " of ",
                  r.documents, " document", r.documents > 1 ? "s" : "",
                  " gives no validation document; use more documents or a larger fraction (or 0: no validation split)");
  r.train_tokens = train.tokens();
  r.val_tokens = val.tokens();
  r.train_shards = train.finish();
  r.val_shards = val.finish();

  nlohmann::json meta = {
      {"format", "axonn-prepare"},
      {"format_version", 1},
      {"tokenizer", o.tokenizer_name},
      {"tokenizer_kind", tok.describe()},
      {"vocab_size", tok.vocab_size()},
      {"document_separator", separator},
      {"token_type", r.token_bytes == 2 ? "uint16" : "uint32"},
      {"shard_tokens", o.shard_tokens},
      {"val_fraction", o.val_fraction},
      {"documents", r.documents},
      {"val_documents", r.val_documents},
      {"duplicates_skipped", r.duplicates_skipped},
      {"train_tokens", r.train_tokens},
      {"val_tokens", r.val_tokens},
      {"text_bytes", r.bytes},
      {"inputs", reader.files()}};
  meta["train_shards"] = nlohmann::json::array();
  meta["val_shards"] = nlohmann::json::array();
  for (auto* list : {&r.train_shards, &r.val_shards})
    for (auto& p : *list) {
      const std::string name = fs::path(p).filename().string();
      meta[list == &r.train_shards ? "train_shards" : "val_shards"].push_back(name);
      p = (out / name).string();  // where it will be once committed
    }
  {
    std::ofstream f(fs::path(staging.dir) / "prepare.json");
    f << meta.dump(2) << "\n";
    AXONN_CHECK_IO(f.good(), "cannot write '", staging.dir, "/prepare.json'");
  }
  fsync_dir(staging.dir);

  // commit: the whole set appears at once
  const std::string old = out.string() + ".old";
  if (fs::exists(out, ec)) {
    fs::remove_all(old, ec);
    fs::rename(out, old, ec);
    AXONN_CHECK_IO(!ec, "cannot move the old '", o.output, "' aside: ", ec.message());
  }
  fs::rename(staging.dir, out, ec);
  AXONN_CHECK_IO(!ec, "cannot rename '", staging.dir, "' to '", o.output, "': ", ec.message());
  staging.committed = true;
  fsync_dir(out.parent_path());
  fs::remove_all(old, ec);
  r.seconds = elapsed();
  return r;
}

}  // namespace axonn::data
