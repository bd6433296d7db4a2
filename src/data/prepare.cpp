#include "axonn/data/prepare.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
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
// A document longer than this is encoded in pieces (text::split_for_encoding): SentencePiece holds
// ~100 bytes per byte it encodes at once, so one 88 MB line once took over 7 GB.
constexpr size_t kPieceBytes = 1u << 20;

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

// The identity of a file, whatever path names it (links followed).
struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId&) const = default;
};
std::optional<FileId> file_id(const fs::path& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// prepare.json marks a directory that prepare made: every output has it, and the staging directory
// gets a placeholder as it is made. `dir` itself must not be a link.
bool made_by_prepare(const fs::path& dir) {
  std::error_code ec;
  const fs::path marker = dir / "prepare.json";
  if (!fs::is_directory(fs::symlink_status(dir, ec)) || !fs::is_regular_file(fs::symlink_status(marker, ec)))
    return false;
  std::ifstream f(marker);
  const auto j = nlohmann::json::parse(f, nullptr, false);
  return j.is_object() && j.contains("format") && j["format"] == "axonn-prepare";
}

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  AXONN_CHECK_IO(f.good(), "cannot write '", path.string(), "'");
}

// Refuses an input that is, holds or lies above the output or the two directories beside it that
// prepare replaces (DIR.tmp, DIR.old): --overwrite would delete it, or prepare would write into what
// it reads. Compared by device and inode, so links and other spellings of a path are seen through.
void check_apart(const std::vector<std::string>& inputs, const fs::path& out, const std::string& output) {
  std::error_code ec;
  std::vector<FileId> above;  // the directories above the output
  for (fs::path p = fs::weakly_canonical(fs::absolute(out, ec), ec).parent_path();; p = p.parent_path()) {
    if (auto id = file_id(p)) above.push_back(*id);
    if (p == p.parent_path()) break;
  }
  std::vector<std::pair<FileId, std::string>> replaced;
  for (const std::string& d : {out.string(), out.string() + ".tmp", out.string() + ".old"})
    if (auto id = file_id(d)) replaced.emplace_back(*id, d);
  for (const auto& in : inputs) {
    const auto id = file_id(in);
    if (!id) continue;  // the document reader says what is missing
    AXONN_CHECK_ARG(!(file_id(out) == id), "input '", in, "' is --output '", output,
                    "' itself; write the shards to another directory");
    for (const auto& dir : above)
      AXONN_CHECK_ARG(!(dir == *id), "--output '", output, "' lies inside the input directory '", in,
                      "', whose files prepare reads; choose an --output outside every input");
    for (fs::path p = fs::weakly_canonical(fs::absolute(in, ec), ec);; p = p.parent_path()) {
      const auto pid = file_id(p);
      for (const auto& [r, name] : replaced)
        AXONN_CHECK_ARG(!pid || !(*pid == r), "'", name, "' holds the input '", in,
                        "', and prepare replaces it; choose an --output that holds none of the inputs");
      if (p == p.parent_path()) break;
    }
  }
}

// Whether a directory beside the output (DIR.tmp, DIR.old, left by a run that was killed) may be
// removed: it is absent, empty, or prepare made it; otherwise it is the user's, and the run stops.
void check_ours(const fs::path& dir, const std::string& output) {
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  AXONN_CHECK_ARG(fs::is_directory(st) && (fs::is_empty(dir, ec) || made_by_prepare(dir)), "'", dir.string(),
                  "' exists and axonn prepare did not make it (it has no prepare.json of prepare's), but it needs ",
                  "that name beside --output '", output, "' (DIR.tmp holds the shards while they are written, DIR.old ",
                  "the output that --overwrite replaces); move it away, or choose another --output");
}

// An exclusive flock on DIR.lock, beside the output, for the whole run: a second run into the same
// output stops at once instead of meeting the first in DIR.tmp. The file is opened without following
// a link (O_NOFOLLOW) or waiting on a FIFO (O_NONBLOCK), a file of someone else's is never taken
// over, and the lock file is removed when the run ends (one left by a killed run is taken over: its
// flock died with it).
class OutputLock {
 public:
  OutputLock(const std::string& path, const std::string& output) : path_(path) {
    for (int attempt = 0;; attempt++) {
      fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
      AXONN_CHECK_ARG(fd_ >= 0 || errno != ELOOP, "the lock file '", path, "' of --output '", output,
                      "' is a symbolic link; move it away, or choose another --output");
      AXONN_CHECK_IO(fd_ >= 0, "cannot create the lock file '", path, "': ", std::strerror(errno));
      struct stat st;
      const std::string holder = contents();
      if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || !(holder.empty() || holder.starts_with(kTag))) {
        ::close(fd_);
        throw InvalidArgument("'" + path + "' is not a lock file of axonn prepare's, but prepare needs that name to " +
                              "lock --output '" + output + "'; move it away, or choose another --output");
      }
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd_);
        const std::string pid =
            holder.empty() ? "" : " (pid " + holder.substr(kTag.size(), holder.find('\n') - kTag.size()) + ")";
        throw InvalidArgument("another axonn prepare" + pid + " is writing --output '" + output +
                              "': it holds the lock '" + path + "'; wait for it to finish, or choose another --output");
      }
      // the run that held it may have removed it between our open and our flock: lock the new one
      struct stat now;
      if (::lstat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) break;
      ::close(fd_);
      AXONN_CHECK_IO(attempt < 100, "cannot take the lock '", path, "': it keeps being replaced");
    }
    const std::string mine = std::string(kTag) + std::to_string(::getpid()) + "\n";
    const bool written = ::ftruncate(fd_, 0) == 0 &&
                         ::pwrite(fd_, mine.data(), mine.size(), 0) == static_cast<ssize_t>(mine.size());
    AXONN_CHECK_IO(written, "cannot write the lock file '", path_, "': ", std::strerror(errno));
  }
  ~OutputLock() {
    ::unlink(path_.c_str());  // while still locked, so no other run holds a lock on a file about to go
    ::close(fd_);
  }
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  static constexpr std::string_view kTag = "axonn prepare, pid ";
  std::string contents() const {
    char buf[256];
    const ssize_t n = ::pread(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }
  std::string path_;
  int fd_ = -1;
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

// Encodes pieces[i] into out[i] on `threads` threads (each takes the next piece); the first error
// any thread meets is rethrown here, after all have stopped.
void encode_batch(const text::Tokenizer& tok, const std::vector<std::string_view>& pieces,
                  std::vector<std::vector<int>>& out, int threads) {
  out.assign(pieces.size(), {});
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto work = [&] {
    try {
      for (size_t i; !failed && (i = next.fetch_add(1)) < pieces.size();) out[i] = tok.encode_ordinary(pieces[i]);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  const int n = std::min<int>(threads, static_cast<int>(pieces.size()));
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
  ShardWriter::check_shard_tokens(o.shard_tokens);
  AXONN_CHECK_ARG(tok.can_encode(), tok.describe(),
                  " can only decode; prepare needs a tokenizer that encodes (gpt2, tokenizer.json, vocab.json + "
                  "merges.txt, tokenizer.model)");
  const int separator = tok.document_separator();
  AXONN_CHECK_ARG(separator >= 0, tok.describe(), " has neither a BOS nor an end-of-text token to put between documents");
  PrepareResult r;
  r.token_bytes = token_bytes_for(tok, o.token_type);
  r.piece_bytes = kPieceBytes;
  r.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  AXONN_CHECK_ARG(!o.output.empty(), "--output DIR is required");
  fs::path out = fs::path(o.output).lexically_normal();
  if (!out.has_filename()) out = out.parent_path();  // "data/" is "data"
  std::vector<std::string> read = o.inputs;  // all that the run reads: the tokenizer too, when it is a path
  std::error_code ec;
  if (fs::exists(o.tokenizer_name, ec)) read.push_back(o.tokenizer_name);
  check_apart(read, out, o.output);
  text::DocumentReader reader(o.inputs, o.documents);  // every input exists and is readable

  // From here on this run owns DIR, DIR.tmp and DIR.old, or stops before it touches them.
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  OutputLock lock(out.string() + ".lock", o.output);
  const auto st = fs::symlink_status(out, ec);
  if (fs::exists(st)) {
    AXONN_CHECK_ARG(!fs::is_symlink(st), "--output '", o.output,
                    "' is a symbolic link; name the directory itself (prepare replaces --output, never what a link "
                    "points to)");
    AXONN_CHECK_ARG(fs::is_directory(st), "--output '", o.output, "' exists and is not a directory");
    const bool ours = made_by_prepare(out);
    AXONN_CHECK_ARG(fs::is_empty(out, ec) || (o.overwrite && ours), "--output '", o.output,
                    "' exists and is not empty; ",
                    ours ? "choose a new directory, or pass --overwrite to replace it"
                         : "axonn prepare did not make it (it has no prepare.json of prepare's), so even --overwrite "
                           "will not replace it: choose a new directory, or empty this one yourself");
  }
  const std::string staging_dir = out.string() + ".tmp", old = out.string() + ".old";
  check_ours(staging_dir, o.output);
  check_ours(old, o.output);
  // where each text file is one document, a fraction that leaves none for validation is known now, before
  // the whole corpus is encoded (a single input.txt with the default fraction took its whole encoding to fail)
  if (const std::optional<uint64_t> most = reader.max_documents(); most && o.val_fraction > 0)
    AXONN_CHECK_ARG(std::floor(static_cast<double>(*most) * o.val_fraction) > 0, "--val-fraction ", o.val_fraction,
                    " of at most ", *most, " document", *most == 1 ? "" : "s", " (each text file is one) gives no ",
                    "validation document: cut the text into documents with --doc-separator LINE (the lines between "
                    "them), give JSON Lines or more files, or --val-fraction 0 (no validation split)");
  fs::remove_all(staging_dir, ec);  // a stale one from a run that was killed
  AXONN_CHECK_IO(fs::create_directory(staging_dir, ec), "cannot create '", staging_dir, "': ", ec.message());
  Staging staging{staging_dir};
  write_json(fs::path(staging_dir) / "prepare.json", {{"format", "axonn-prepare"}, {"complete", false}});
  ShardWriter train(staging.dir, "train", r.token_bytes, o.shard_tokens);
  ShardWriter val(staging.dir, "val", r.token_bytes, o.shard_tokens);

  std::unordered_set<XXH128_hash_t, Hash128, Equal128> seen;
  std::vector<text::Document> batch;
  std::vector<std::string_view> pieces;  // of the batch's documents: most are one piece
  std::vector<size_t> piece_count;       // per document
  std::vector<std::vector<int>> ids;     // per piece
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
    pieces.clear();
    piece_count.clear();
    for (const auto& d : batch) {
      const auto parts = text::split_for_encoding(tok, d.text, kPieceBytes);
      pieces.insert(pieces.end(), parts.begin(), parts.end());
      piece_count.push_back(parts.size());
      r.documents_split += parts.size() > 1;
    }
    encode_batch(tok, pieces, ids, r.threads);
    for (size_t k = 0, p = 0; k < batch.size(); k++) {
      const auto i = static_cast<double>(r.documents);
      const bool is_val = std::floor((i + 1) * o.val_fraction) > std::floor(i * o.val_fraction);
      tokens.assign(1, static_cast<uint32_t>(separator));
      for (const size_t end = p + piece_count[k]; p < end; p++)
        tokens.insert(tokens.end(), ids[p].begin(), ids[p].end());
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

  // the tokenizer travels with the data: its files in DIR/tokenizer, which load_tokenizer reads as a directory
  // (train carries them into its checkpoints, generate and convert take them from there)
  const auto tok_files = text::tokenizer_files(o.tokenizer_name);
  if (!tok_files.empty()) {
    const fs::path tok_dir = fs::path(staging.dir) / kPreparedTokenizerDir;
    fs::create_directory(tok_dir, ec);
    for (const auto& [from, name] : tok_files) {
      fs::copy_file(from, tok_dir / name, fs::copy_options::overwrite_existing, ec);
      AXONN_CHECK_IO(!ec, "cannot copy the tokenizer file '", from, "' to '", (tok_dir / name).string(), "': ",
                     ec.message());
    }
    fsync_dir(tok_dir.string());
  }
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
  if (!tok_files.empty()) meta["tokenizer_dir"] = kPreparedTokenizerDir;
  meta["train_shards"] = nlohmann::json::array();
  meta["val_shards"] = nlohmann::json::array();
  for (auto* list : {&r.train_shards, &r.val_shards})
    for (auto& p : *list) {
      const std::string name = fs::path(p).filename().string();
      meta[list == &r.train_shards ? "train_shards" : "val_shards"].push_back(name);
      p = (out / name).string();  // where it will be once committed
    }
  write_json(fs::path(staging.dir) / "prepare.json", meta);
  fsync_dir(staging.dir);

  // commit: the whole set appears at once
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

std::optional<std::string> prepared_tokenizer(const std::string& data) {
  if (data.empty() || !made_by_prepare(data)) return std::nullopt;
  std::ifstream f(fs::path(data) / "prepare.json");
  const auto j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("tokenizer_dir") || !j["tokenizer_dir"].is_string()) return std::nullopt;
  const fs::path dir = fs::path(data) / j["tokenizer_dir"].get<std::string>();
  if (text::tokenizer_files_in(dir.string()).empty()) return std::nullopt;
  return dir.string();
}

std::optional<int> prepared_vocab_size(const std::string& data) {
  if (data.empty() || !made_by_prepare(data)) return std::nullopt;
  std::ifstream f(fs::path(data) / "prepare.json");
  const auto j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || j.value("complete", true) == false || !j.contains("vocab_size") ||
      !j["vocab_size"].is_number_integer())
    return std::nullopt;
  const int64_t v = j["vocab_size"].get<int64_t>();
  if (v <= 0 || v > INT32_MAX) return std::nullopt;
  return static_cast<int>(v);
}

}  // namespace axonn::data
