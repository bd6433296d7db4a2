#include "axonn/checkpoint/checkpoint_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "axonn/core/error.hpp"
#include "axonn/core/version.hpp"

namespace axonn::checkpoint {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr std::string_view kFormatName = "axonn-checkpoint";
constexpr std::string_view kManifestHashField = "manifest_xxh3";
// Suffixes of directories that are not (or no longer) committed steps.
constexpr std::string_view kTmpSuffix = ".tmp";            // a save in progress or interrupted
constexpr std::string_view kOldSuffix = ".old";            // a step being replaced by a save of the same step
constexpr std::string_view kDeletingSuffix = ".deleting";  // a step being pruned

std::string join(const std::string& dir, std::string_view name) { return (fs::path(dir) / name).string(); }

// A file name that stays inside the step directory.
bool plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// For step-N followed by one of our suffixes: the suffix; nullopt for anything else.
std::optional<std::string_view> leftover_suffix(std::string_view name) {
  for (std::string_view suf : {kTmpSuffix, kOldSuffix, kDeletingSuffix})
    if (name.size() > suf.size() && name.ends_with(suf) &&
        parse_step_dir_name(name.substr(0, name.size() - suf.size())).has_value())
      return suf;
  return std::nullopt;
}

// The directory's own name, also for "a/b/" (whose filename() is empty).
std::string last_component(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  return p.has_filename() ? p.filename().string() : p.parent_path().filename().string();
}

bool is_committed(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(dir, ec) && fs::is_regular_file(join(dir, kManifestName), ec);
}

// The step `latest` names, if the pointer exists and parses.
std::optional<int64_t> read_latest_pointer(const std::string& root) {
  std::string p = join(root, kLatestName);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  std::string s;
  try {
    s = read_text_file(p);
  } catch (const IoError&) {
    return std::nullopt;
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return parse_step_dir_name(s);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  AXONN_CHECK_IO(std::rename(from.c_str(), to.c_str()) == 0, "cannot rename '", from, "' to '", to,
                 "': ", std::strerror(errno));
}

// Removes a directory tree without ever leaving a partial tree under a step name: rename, make the
// rename durable, then delete.
void remove_step_dir(const std::string& root, const std::string& name) {
  std::string from = join(root, name), to = from + std::string(kDeletingSuffix);
  rename_or_throw(from, to);
  fsync_dir(root);
  std::error_code ec;
  fs::remove_all(to, ec);
  AXONN_CHECK_IO(!ec, "cannot remove '", to, "': ", ec.message());
}

// Deletes what interrupted saves, replacements and removals left behind (and a `latest.tmp` from
// a crash while the pointer was being replaced).
void remove_leftovers(const std::string& root) {
  std::error_code ec;
  std::vector<std::string> dead;
  const std::string latest_tmp = std::string(kLatestName) + std::string(kTmpSuffix);
  for (const auto& e : fs::directory_iterator(root, ec)) {
    std::string name = e.path().filename().string();
    if (leftover_suffix(name) || name == latest_tmp) dead.push_back(e.path().string());
  }
  for (const std::string& d : dead) {
    fs::remove_all(d, ec);
    AXONN_CHECK_IO(!ec, "cannot remove the leftover '", d, "': ", ec.message());
  }
}

// --- JSON field access with errors that name the manifest and the field ---------------------------

const nlohmann::json& field(const nlohmann::json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  AXONN_CHECK_IO(it != obj.end(), "manifest '", where, "': missing field '", key, "'");
  return *it;
}

int64_t get_int(const nlohmann::json& obj, const char* key, const std::string& where, int64_t min = 0) {
  const auto& v = field(obj, key, where);
  AXONN_CHECK_IO(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX), "manifest '",
                 where, "': field '", key, "' is not an integer: ", v.dump());
  int64_t x = v.get<int64_t>();
  AXONN_CHECK_IO(x >= min, "manifest '", where, "': field '", key, "' is ", x, ", must be >= ", min);
  return x;
}

int get_int32(const nlohmann::json& obj, const char* key, const std::string& where, int min) {
  int64_t x = get_int(obj, key, where, min);
  AXONN_CHECK_IO(x <= INT32_MAX, "manifest '", where, "': field '", key, "' is too large: ", x);
  return static_cast<int>(x);
}

uint64_t get_uint(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto& v = field(obj, key, where);
  AXONN_CHECK_IO(v.is_number_unsigned(), "manifest '", where, "': field '", key,
                 "' is not a non-negative integer: ", v.dump());
  return v.get<uint64_t>();
}

std::string get_string(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto& v = field(obj, key, where);
  AXONN_CHECK_IO(v.is_string(), "manifest '", where, "': field '", key, "' is not a string: ", v.dump());
  return v.get<std::string>();
}

const nlohmann::json& get_object(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto& v = field(obj, key, where);
  AXONN_CHECK_IO(v.is_object(), "manifest '", where, "': field '", key, "' is not an object");
  return v;
}

double get_double(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto& v = field(obj, key, where);
  AXONN_CHECK_IO(v.is_number(), "manifest '", where, "': '", key, "' is not a number");
  return v.get<double>();
}

bool get_bool(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto& v = field(obj, key, where);
  AXONN_CHECK_IO(v.is_boolean(), "manifest '", where, "': '", key, "' is not true or false");
  return v.get<bool>();
}

// The model's shape in a manifest: GPT-2's six numbers (as before Llama existed); a Llama model adds
// its family and the Llama fields.
Json model_to_json(const model::GptConfig& c) {
  Json j = {{"num_layers", c.num_layers}, {"num_heads", c.num_heads},
            {"channels", c.channels},     {"vocab_size", c.vocab_size},
            {"padded_vocab_size", c.padded_vocab_size}, {"max_seq_len", c.max_seq_len}};
  if (c.family == model::Family::kGpt2) return j;
  j["family"] = std::string(model::family_name(c.family));
  j["num_kv_heads"] = c.kv_heads();
  j["head_dim"] = c.head_dim;
  j["ffn_hidden"] = c.mlp_hidden();
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = nullptr;
  if (c.rope_scaling.enabled())
    j["rope_scaling"] = {{"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  j["norm_eps"] = static_cast<double>(c.norm_eps);
  j["tied_embeddings"] = c.tied_embeddings;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_ids"] = c.eos_token_ids;
  return j;
}

model::GptConfig model_from_json(const nlohmann::json& j, const std::string& where) {
  model::GptConfig c;
  c.num_layers = get_int32(j, "num_layers", where, 1);
  c.num_heads = get_int32(j, "num_heads", where, 1);
  c.channels = get_int32(j, "channels", where, 1);
  c.vocab_size = get_int32(j, "vocab_size", where, 1);
  c.padded_vocab_size = get_int32(j, "padded_vocab_size", where, 1);
  c.max_seq_len = get_int32(j, "max_seq_len", where, 1);
  if (!j.contains("family")) return c;  // GPT-2
  try {
    c.family = model::parse_family(get_string(j, "family", where));
  } catch (const InvalidArgument& e) {
    throw IoError("manifest '" + where + "': " + e.what());
  }
  c.num_kv_heads = get_int32(j, "num_kv_heads", where, 1);
  c.head_dim = get_int32(j, "head_dim", where, 0);
  c.ffn_hidden = get_int32(j, "ffn_hidden", where, 1);
  c.rope_theta = get_double(j, "rope_theta", where);
  const auto& scaling = field(j, "rope_scaling", where);
  if (!scaling.is_null()) {
    AXONN_CHECK_IO(scaling.is_object(), "manifest '", where, "': 'rope_scaling' is not an object or null");
    c.rope_scaling.factor = get_double(scaling, "factor", where);
    c.rope_scaling.low_freq_factor = get_double(scaling, "low_freq_factor", where);
    c.rope_scaling.high_freq_factor = get_double(scaling, "high_freq_factor", where);
    c.rope_scaling.original_max_position_embeddings = get_int32(scaling, "original_max_position_embeddings", where, 1);
  }
  c.norm_eps = static_cast<float>(get_double(j, "norm_eps", where));
  c.tied_embeddings = get_bool(j, "tied_embeddings", where);
  c.bos_token_id = get_int32(j, "bos_token_id", where, -1);
  const auto& eos = field(j, "eos_token_ids", where);
  AXONN_CHECK_IO(eos.is_array(), "manifest '", where, "': 'eos_token_ids' is not a list");
  for (const auto& id : eos) {
    AXONN_CHECK_IO(id.is_number_integer(), "manifest '", where, "': 'eos_token_ids' holds a non-integer");
    c.eos_token_ids.push_back(id.get<int>());
  }
  return c;
}

}  // namespace

std::string library_version() { return std::string("axonn ") + version(); }

std::string GridExtent::str() const {
  return std::to_string(gx) + "x" + std::to_string(gy) + "x" + std::to_string(gz) + "x" + std::to_string(gdata);
}

// --- manifest ------------------------------------------------------------------------------------

std::string manifest_to_json(const Manifest& m) {
  Json j;
  j["format"] = kFormatName;
  j["format_version"] = m.format_version;
  j["library_version"] = m.library_version;
  j["step"] = m.step;
  j["tokens_seen"] = m.tokens_seen;
  j["model"] = model_to_json(m.model);
  j["grid"] = {{"gx", m.grid.gx}, {"gy", m.grid.gy}, {"gz", m.grid.gz}, {"gdata", m.grid.gdata}};
  j["loader"] = {{"shard", m.loader.shard}, {"position", m.loader.position}};
  j["rng"] = {{"seed", m.rng.seed}, {"counter", m.rng.counter}, {"engine", m.rng.engine}};
  Json extra = Json::object();
  for (const auto& [k, v] : m.extra) extra[k] = v;
  j["extra"] = std::move(extra);
  j["hash"] = kHashName;
  Json files = Json::array();
  for (const FileEntry& f : m.files)
    files.push_back({{"name", f.name}, {"bytes", f.bytes}, {std::string(kHashName), hash_to_hex(f.xxh3)}});
  j["files"] = std::move(files);
  // the manifest's own checksum, over its text without it (manifest_from_json recomputes it so)
  const uint64_t own = hash_bytes(j.dump(2) + "\n");
  j[std::string(kManifestHashField)] = hash_to_hex(own);
  return j.dump(2) + "\n";
}

Manifest manifest_from_json(std::string_view text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw IoError("manifest '" + where + "' is not valid JSON (truncated or corrupt?): " + e.what());
  }
  AXONN_CHECK_IO(j.is_object(), "manifest '", where, "' is not a JSON object");
  std::string format = get_string(j, "format", where);
  AXONN_CHECK_IO(format == kFormatName, "manifest '", where, "' has format '", format, "', not '", kFormatName, "'");
  Manifest m;
  m.format_version = get_int32(j, "format_version", where, 1);
  AXONN_CHECK_IO(m.format_version <= kManifestVersion, "manifest '", where, "' has format_version ", m.format_version,
                 ", written by a newer axonn; this build reads up to ", kManifestVersion, ": upgrade axonn");
  m.library_version = get_string(j, "library_version", where);
  m.step = get_int(j, "step", where);
  m.tokens_seen = get_int(j, "tokens_seen", where);

  m.model = model_from_json(get_object(j, "model", where), where);
  try {
    m.model.validate();
  } catch (const InvalidArgument& e) {
    throw IoError("manifest '" + where + "' has a bad model config: " + e.what());
  }

  const auto& grid = get_object(j, "grid", where);
  m.grid.gx = get_int32(grid, "gx", where, 1);
  m.grid.gy = get_int32(grid, "gy", where, 1);
  m.grid.gz = get_int32(grid, "gz", where, 1);
  m.grid.gdata = get_int32(grid, "gdata", where, 1);

  const auto& loader = get_object(j, "loader", where);
  m.loader.shard = get_int(loader, "shard", where);
  m.loader.position = get_int(loader, "position", where);

  const auto& rng = get_object(j, "rng", where);
  m.rng.seed = get_uint(rng, "seed", where);
  m.rng.counter = get_uint(rng, "counter", where);
  m.rng.engine = get_string(rng, "engine", where);

  const auto& extra = get_object(j, "extra", where);
  for (auto it = extra.begin(); it != extra.end(); ++it) {
    AXONN_CHECK_IO(it.value().is_string(), "manifest '", where, "': extra field '", it.key(), "' is not a string");
    m.extra[it.key()] = it.value().get<std::string>();
  }

  std::string hash = get_string(j, "hash", where);
  AXONN_CHECK_IO(hash == kHashName, "manifest '", where, "' uses hash '", hash, "'; this build knows ", kHashName);
  const auto& files = field(j, "files", where);
  AXONN_CHECK_IO(files.is_array(), "manifest '", where, "': field 'files' is not an array");
  std::set<std::string> seen;
  for (const auto& f : files) {
    AXONN_CHECK_IO(f.is_object(), "manifest '", where, "': an entry of 'files' is not an object");
    FileEntry e;
    e.name = get_string(f, "name", where);
    AXONN_CHECK_IO(plain_file_name(e.name), "manifest '", where, "' lists a file outside its directory: '", e.name,
                   "'");
    AXONN_CHECK_IO(seen.insert(e.name).second, "manifest '", where, "' lists file '", e.name, "' twice");
    e.bytes = get_uint(f, "bytes", where);
    std::string hex = get_string(f, std::string(kHashName).c_str(), where);
    auto h = hash_from_hex(hex);
    AXONN_CHECK_IO(h.has_value(), "manifest '", where, "': file '", e.name, "' has a malformed hash '", hex,
                   "' (want 16 hex digits)");
    e.xxh3 = *h;
    m.files.push_back(std::move(e));
  }
  // Last, the manifest's own checksum (version 2 on): the text, parsed in its order, re-serialised
  // without the field, must hash to it. A field edited by hand or a flipped byte fails here.
  if (m.format_version >= 2) {
    std::string recorded = get_string(j, std::string(kManifestHashField).c_str(), where);
    Json ordered = Json::parse(text);
    ordered.erase(std::string(kManifestHashField));
    const uint64_t actual = hash_bytes(ordered.dump(2) + "\n");
    AXONN_CHECK_IO(hash_from_hex(recorded) == actual, "manifest '", where, "' fails its own checksum (",
                   kHashName, " ", hash_to_hex(actual), ", it records ", recorded,
                   "): it was edited or is corrupt; restore it or use another checkpoint");
  }
  return m;
}

// --- names ---------------------------------------------------------------------------------------

std::string step_dir_name(int64_t step) {
  AXONN_CHECK_ARG(step >= 0, "checkpoint step must be >= 0, got ", step);
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

std::optional<int64_t> parse_step_dir_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step-";
  if (!name.starts_with(kPrefix)) return std::nullopt;
  std::string_view digits = name.substr(kPrefix.size());
  // 18 digits always fit in int64
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string step_dir(const std::string& root, int64_t step) { return join(root, step_dir_name(step)); }

std::string staging_dir(const std::string& root, int64_t step) {
  return step_dir(root, step) + std::string(kTmpSuffix);
}

std::string tp_file_name(int x, int y, int z) {
  return "tp-x" + std::to_string(x) + "-y" + std::to_string(y) + "-z" + std::to_string(z) + ".safetensors";
}

// --- saving --------------------------------------------------------------------------------------

std::string begin_checkpoint(const std::string& root, int64_t step) {
  std::error_code ec;
  fs::create_directories(root, ec);
  AXONN_CHECK_IO(!ec && fs::is_directory(root), "cannot create checkpoint directory '", root,
                 "': ", ec ? ec.message() : "a file of that name exists");
  std::string tmp = staging_dir(root, step);
  fs::remove_all(tmp, ec);  // a previous attempt at this step that crashed
  AXONN_CHECK_IO(!ec, "cannot remove the stale '", tmp, "': ", ec.message());
  AXONN_CHECK_IO(fs::create_directory(tmp, ec) && !ec, "cannot create '", tmp, "': ", ec.message());
  return tmp;
}

FileEntry write_checkpoint_file(const std::string& staging, const std::string& name, const SafetensorsWriter& w,
                                Progress* progress) {
  AXONN_CHECK_ARG(plain_file_name(name) && name != kManifestName, "bad checkpoint file name '", name, "'");
  std::error_code ec;
  AXONN_CHECK_IO(fs::is_directory(staging, ec), "checkpoint staging directory '", staging,
                 "' does not exist (begin_checkpoint not called, or another rank removed it)");
  FileDigest d = w.write(join(staging, name), progress);
  return FileEntry{name, d.bytes, d.xxh3};
}

std::string commit_checkpoint(const std::string& root, const Manifest& manifest, int keep) {
  AXONN_CHECK_ARG(keep >= 0, "--keep must be >= 0 (0 keeps every checkpoint), got ", keep);
  const std::string tmp = staging_dir(root, manifest.step);
  std::error_code ec;
  AXONN_CHECK_IO(fs::is_directory(tmp, ec), "cannot commit checkpoint step ", manifest.step, ": '", tmp,
                 "' does not exist (begin_checkpoint was not called for this step)");
  // Every listed file must be complete before the step becomes visible; a rank whose write failed
  // shows up here as a missing file, and the previous checkpoint stays the latest.
  for (const FileEntry& f : manifest.files) {
    AXONN_CHECK_ARG(plain_file_name(f.name), "bad checkpoint file name '", f.name, "'");
    std::string p = join(tmp, f.name);
    auto size = fs::file_size(p, ec);
    AXONN_CHECK_IO(!ec, "cannot commit checkpoint step ", manifest.step, ": file '", p, "' is missing (", ec.message(),
                   "); did every rank write its file?");
    AXONN_CHECK_IO(size == f.bytes, "cannot commit checkpoint step ", manifest.step, ": file '", p, "' is ", size,
                   " bytes, but its writer reported ", f.bytes);
  }
  write_file_atomic(join(tmp, kManifestName), manifest_to_json(manifest));

  // The commit point: the rename makes the step visible whole. A step of the same number (a run
  // that resumed from an earlier step and reached this one again) is moved aside first, because a
  // rename cannot replace a non-empty directory.
  const std::string final_dir = step_dir(root, manifest.step);
  const std::string old = final_dir + std::string(kOldSuffix);
  bool replaced = false;
  if (fs::exists(final_dir, ec)) {
    fs::remove_all(old, ec);
    rename_or_throw(final_dir, old);
    replaced = true;
  }
  rename_or_throw(tmp, final_dir);
  fsync_dir(root);
  if (replaced) fs::remove_all(old, ec);

  // The pointer goes last: whoever reads it finds a committed step.
  write_file_atomic(join(root, kLatestName), step_dir_name(manifest.step) + "\n");
  if (keep > 0) prune_checkpoints(root, keep);
  remove_leftovers(root);
  return final_dir;
}

void prune_checkpoints(const std::string& root, int keep) {
  AXONN_CHECK_ARG(keep >= 1, "prune_checkpoints needs keep >= 1, got ", keep);
  std::vector<int64_t> steps = list_checkpoints(root);
  std::optional<int64_t> latest = read_latest_pointer(root);
  // newest first; keep the `keep` newest, and the one `latest` names whatever its age
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = static_cast<size_t>(keep); i < steps.size(); i++)
    if (steps[i] != latest) remove_step_dir(root, step_dir_name(steps[i]));
  remove_leftovers(root);
}

int remove_all_checkpoints(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return 0;
  std::vector<std::string> steps, pointers;
  const std::string latest(kLatestName), latest_tmp = latest + std::string(kTmpSuffix);
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (parse_step_dir_name(name) && !e.is_symlink(ec) && e.is_directory(ec)) steps.push_back(name);
    else if (leftover_suffix(name) || name == latest || name == latest_tmp) pointers.push_back(e.path().string());
  }
  // `latest` first: a crash mid-way leaves steps without a pointer, never a pointer to a removed step
  for (const std::string& p : pointers) {
    fs::remove_all(p, ec);  // a link is removed itself, never its target
    AXONN_CHECK_IO(!ec, "cannot remove '", p, "': ", ec.message());
  }
  for (const std::string& name : steps) remove_step_dir(root, name);
  return static_cast<int>(steps.size());
}

// --- the lock ------------------------------------------------------------------------------------

DirectoryLock::DirectoryLock(const std::string& root, const std::string& what, const std::string& flag) {
  std::error_code ec;
  fs::create_directories(root, ec);
  AXONN_CHECK_IO(!ec && fs::is_directory(root, ec), "cannot create ", what, " '", root,
                 "': ", ec ? ec.message() : "a file of that name exists");
  const std::string path = join(root, kLockName);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  AXONN_CHECK_IO(fd_ >= 0 || errno != ELOOP, "the lock '", path, "' of ", what, " '", root, "' is a symbolic link: ",
                 "axonn never writes through a link in its own directories. Remove the link");
  AXONN_CHECK_IO(fd_ >= 0, "cannot create the lock '", path, "' of ", what, " '", root,
                 "': ", std::strerror(errno), "; give ", flag, " a directory you can write");
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(fd_, F_SETLK, &fl) != 0) {
    const int err = errno;
    char holder[256] = {};
    const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : std::string("another process");
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    ::close(fd_);
    fd_ = -1;
    throw IoError(err == EACCES || err == EAGAIN
                      ? what + " '" + root + "' is in use by another run (" + who +
                            "): two runs writing into one directory would break each other's files. Wait "
                            "for it to end, or give this run another " + flag
                      : "cannot lock '" + path + "': " + std::strerror(err));
  }
  char host[128] = {};
  gethostname(host, sizeof host - 1);
  const std::string who = "pid " + std::to_string(::getpid()) + " on host " + host + " since " +
                          std::to_string(static_cast<long long>(std::time(nullptr))) + " (Unix time)\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, who.data(), who.size(), 0);  // for the message only
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

// --- finding and loading ---------------------------------------------------------------------------

std::vector<int64_t> list_checkpoints(const std::string& root) {
  std::vector<int64_t> steps;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return steps;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    auto step = parse_step_dir_name(e.path().filename().string());
    if (step && is_committed(e.path().string())) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

bool holds_checkpoints(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(join(dir, kManifestName), ec) ||
         fs::exists(fs::symlink_status(join(dir, kLatestName), ec)) || !list_checkpoints(dir).empty();
}

std::optional<std::string> find_latest(const std::string& root) {
  const std::string pointer = join(root, kLatestName);
  std::error_code ec;
  if (fs::exists(pointer, ec)) {
    // `latest` is written last, after its step committed: it is followed, or nothing is (an older step
    // would silently continue another run than the newest one's)
    const std::optional<int64_t> step = read_latest_pointer(root);
    AXONN_CHECK_IO(step.has_value(), "'", pointer, "' does not name a step (want step-NNNNNNNN): it was edited or "
                   "is corrupt; write the step to resume into it, or resume from a step directory with --resume-from");
    const std::string dir = step_dir(root, *step);
    // a crash while a save replaced this very step (commit_checkpoint moves the old copy aside for a
    // moment): the old copy is whole
    if (!fs::exists(dir, ec) && is_committed(dir + std::string(kOldSuffix))) return dir + std::string(kOldSuffix);
    AXONN_CHECK_IO(is_committed(dir), "'", pointer, "' names ", step_dir_name(*step), ", which is ",
                   fs::exists(dir, ec) ? "not a complete checkpoint (its manifest.json is missing)" : "missing",
                   ": the directory was changed by hand. Restore it, or choose a step: --resume-from ", root,
                   "/step-NNNNNNNN (committed steps: ", list_checkpoints(root).size(), ")");
    return dir;
  }
  // no pointer (a crash between the first commit's rename and the pointer, or it was deleted): the
  // newest committed step
  std::vector<int64_t> steps = list_checkpoints(root);
  if (steps.empty()) return std::nullopt;
  return step_dir(root, steps.back());
}

std::string resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  AXONN_CHECK_IO(fs::exists(path, ec), "checkpoint '", path, "' does not exist");
  AXONN_CHECK_IO(fs::is_directory(path, ec), "checkpoint '", path,
                 "' is a file, not a checkpoint directory (a root with step-NNNNNNNN/ directories, or one of them)");
  const std::string name = last_component(path);
  AXONN_CHECK_IO(leftover_suffix(name) != kTmpSuffix, "checkpoint '", path,
                 "' is an unfinished save (a .tmp directory, left by a crash or still being written); use a "
                 "committed step directory or the checkpoint root");
  if (fs::exists(join(path, kManifestName), ec)) return path;
  AXONN_CHECK_IO(!parse_step_dir_name(name).has_value(), "checkpoint '", path,
                 "' has no manifest.json: the save did not complete");
  if (auto latest = find_latest(path)) return *latest;
  // a folder above the checkpoints (a run directory, whose checkpoints/ holds them): name where they are
  std::string below;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_directory(ec) && !list_checkpoints(e.path().string()).empty())
      below += std::string(below.empty() ? "" : ", ") + "'" + e.path().string() + "'";
  throw IoError(detail::concat("'", path, "' holds no committed checkpoint (no step-NNNNNNNN directory with a ",
                               "manifest.json)", below.empty() ? std::string() : "; " + below + " does: give that"));
}

Manifest read_manifest(const std::string& dir) {
  std::string p = join(dir, kManifestName);
  std::error_code ec;
  AXONN_CHECK_IO(fs::is_regular_file(p, ec), "checkpoint '", dir,
                 "' has no manifest.json: the save did not complete, or this is not a checkpoint directory");
  Manifest m = manifest_from_json(read_text_file(p), p);
  const std::string name = last_component(dir);
  if (auto step = parse_step_dir_name(name))
    AXONN_CHECK_IO(*step == m.step, "manifest '", p, "' says step ", m.step, " but its directory is ", name);
  return m;
}

std::vector<FileStatus> check_checkpoint_files(const std::string& dir, const Manifest& m,
                                               const std::vector<std::string>& only, Progress* progress) {
  std::vector<FileStatus> out;
  for (const std::string& name : only) {
    bool listed = std::any_of(m.files.begin(), m.files.end(), [&](const FileEntry& f) { return f.name == name; });
    if (!listed) out.push_back(FileStatus{FileEntry{name, 0, 0}, "is not listed in the manifest"});
  }
  for (const FileEntry& f : m.files) {
    if (!only.empty() && std::find(only.begin(), only.end(), f.name) == only.end()) continue;
    FileStatus s{f, {}};
    std::string p = join(dir, f.name);
    std::error_code ec;
    auto size = fs::file_size(p, ec);
    if (ec) {
      s.problem = "is missing (" + ec.message() + ")";
    } else if (size != f.bytes) {
      s.problem = "is " + std::to_string(size) + " bytes, the manifest says " + std::to_string(f.bytes) +
                  (size < f.bytes ? ": the file is truncated" : ": the file is too long");
    } else {
      try {
        FileDigest d = digest_file(p, progress);
        if (d.xxh3 != f.xxh3)
          s.problem = "fails its checksum: " + std::string(kHashName) + " " + hash_to_hex(d.xxh3) +
                      ", the manifest says " + hash_to_hex(f.xxh3) + ": the file is corrupt";
      } catch (const IoError& e) {
        s.problem = std::string("cannot be read: ") + e.what();
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Manifest verify_checkpoint(const std::string& dir, const std::vector<std::string>& only) {
  Manifest m = read_manifest(dir);
  for (const FileStatus& s : check_checkpoint_files(dir, m, only))
    AXONN_CHECK_IO(s.ok(), "checkpoint '", dir, "': file '", s.entry.name, "' ", s.problem);
  return m;
}

void check_model_config(const Manifest& m, const model::GptConfig& e, const std::string& dir) {
  const model::GptConfig& c = m.model;
  AXONN_CHECK_IO(c == e, "checkpoint '", dir, "' is for the model ", c.str(), ", not ", e.str(),
                 "; use a checkpoint of this model or change the model flags to match");
}

// --- arenas <-> safetensors -------------------------------------------------------------------------

void add_arena(SafetensorsWriter& w, std::string_view prefix, const Arena& arena) {
  for (size_t i = 0; i < arena.size(); i++) w.add(std::string(prefix) + "." + arena.slot_name(i), arena.tensor(i));
}

void read_arena(const SafetensorsFile& f, std::string_view prefix, Arena& arena) {
  for (size_t i = 0; i < arena.size(); i++) f.read(std::string(prefix) + "." + arena.slot_name(i), arena.tensor(i));
}

}  // namespace axonn::checkpoint
