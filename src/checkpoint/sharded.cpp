#include "axonn/checkpoint/sharded.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "axonn/core/error.hpp"
#include "axonn/core/timer.hpp"

namespace axonn::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string join(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

bool same_tensor_parallel_grid(const GridExtent& a, const parallel::GridShape& b) {
  return a.gx == b.gx && a.gy == b.gy && a.gz == b.gz;
}

parallel::GridShape shape_of(const GridExtent& g) { return {g.gx, g.gy, g.gz, g.gdata}; }

// Every tensor-parallel coordinate of a grid, x fastest (the order of the manifest's files).
std::vector<parallel::GridCoords> tp_coords(const GridExtent& g) {
  std::vector<parallel::GridCoords> out;
  for (int z = 0; z < g.gz; z++)
    for (int y = 0; y < g.gy; y++)
      for (int x = 0; x < g.gx; x++) out.push_back({x, y, z, 0});
  return out;
}

// The checkpoint's grid must divide its model (a manifest that passed its checksums but names a grid
// the model does not admit is corrupt or hand-edited).
model::ShardMap source_map(const std::string& dir, const Manifest& m, const parallel::GridCoords& at) {
  try {
    return model::ShardMap(m.model, shape_of(m.grid), at);
  } catch (const InvalidArgument& e) {
    throw IoError("checkpoint '" + dir + "' was written on grid " + m.grid.str() +
                  ", which does not fit its model " + m.model.str() + ": " + e.what());
  }
}

const std::string* metadata(const SafetensorsFile& f, const char* key) {
  auto it = f.metadata().find(key);
  return it == f.metadata().end() ? nullptr : &it->second;
}

}  // namespace

// --- agreement -----------------------------------------------------------------------------------

void agree_on_errors(comm::Communicator& comm, std::exception_ptr error) {
  int64_t kind = 0;  // 0 none, 1 IoError, 2 InvalidArgument, 3 anything else
  std::string msg;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const InvalidArgument& e) {
      kind = 2;
      msg = e.what();
    } catch (const IoError& e) {
      kind = 1;
      msg = e.what();
    } catch (const std::exception& e) {
      kind = 3;
      msg = e.what();
    } catch (...) {
      kind = 3;
      msg = "unknown error";
    }
  }
  // the lowest failing rank speaks for all
  int32_t who = kind ? comm.size() - comm.rank() : 0;
  comm.all_reduce(&who, 1, DType::kI32, comm::ReduceOp::kMax);
  if (who == 0) return;
  const int root = comm.size() - who;
  int64_t head[2] = {kind, static_cast<int64_t>(msg.size())};
  comm.broadcast(head, 2, DType::kI64, root);
  std::vector<int32_t> buf(static_cast<size_t>(head[1] + 3) / 4 + 1, 0);
  if (comm.rank() == root) std::memcpy(buf.data(), msg.data(), msg.size());
  comm.broadcast(buf.data(), buf.size(), DType::kI32, root);
  std::string text(reinterpret_cast<const char*>(buf.data()), static_cast<size_t>(head[1]));
  if (head[0] == 2) throw InvalidArgument(text);
  if (head[0] == 1) throw IoError(text);
  throw Error(text);
}

// --- files ---------------------------------------------------------------------------------------

void add_shard_metadata(SafetensorsWriter& w, const Manifest& m, int x, int y, int z) {
  w.set_metadata("format", std::string(kShardFormat));
  w.set_metadata("gx", std::to_string(m.grid.gx));
  w.set_metadata("gy", std::to_string(m.grid.gy));
  w.set_metadata("gz", std::to_string(m.grid.gz));
  w.set_metadata("gdata", std::to_string(m.grid.gdata));
  w.set_metadata("x", std::to_string(x));
  w.set_metadata("y", std::to_string(y));
  w.set_metadata("z", std::to_string(z));
  w.set_metadata("num_layers", std::to_string(m.model.num_layers));
  w.set_metadata("num_heads", std::to_string(m.model.num_heads));
  w.set_metadata("channels", std::to_string(m.model.channels));
  w.set_metadata("vocab_size", std::to_string(m.model.vocab_size));
  w.set_metadata("padded_vocab_size", std::to_string(m.model.padded_vocab_size));
  w.set_metadata("max_seq_len", std::to_string(m.model.max_seq_len));
  w.set_metadata("step", std::to_string(m.step));
}

std::vector<std::string> files_to_read(const std::string& dir, const Manifest& m, const model::ShardMap& target) {
  std::vector<std::string> names;
  for (const parallel::GridCoords& at : tp_coords(m.grid)) {
    (void)source_map(dir, m, at);  // the grid fits the model
    std::string name = tp_file_name(at.x, at.y, at.z);
    bool listed = false;
    for (const FileEntry& f : m.files) listed = listed || f.name == name;
    AXONN_CHECK_IO(listed, "checkpoint '", dir, "' is incomplete: its manifest lists no file '", name,
                   "', one of the grid ", m.grid.str(), "'s files");
    names.push_back(std::move(name));
  }
  if (same_tensor_parallel_grid(m.grid, target.shape())) {
    const parallel::GridCoords& at = target.coords();
    return {tp_file_name(at.x, at.y, at.z)};
  }
  return names;
}

struct ShardFiles::Impl {
  struct Source {
    std::string name;
    parallel::GridCoords at;
    std::optional<model::ShardMap> map;
    std::unique_ptr<SafetensorsFile> file;
  };
  std::string dir;
  Manifest manifest;
  std::vector<Source> sources;

  const Source* find(const parallel::GridCoords& at) const {
    for (const Source& s : sources)
      if (s.at.x == at.x && s.at.y == at.y && s.at.z == at.z) return &s;
    return nullptr;
  }
  // The bytes of tensor `prefix.p` in source s (checked to exist at construction).
  const std::byte* data(const Source& s, std::string_view prefix, int p) const {
    return s.file->data(s.file->get(std::string(prefix) + "." + s.map->spec().params[static_cast<size_t>(p)].name));
  }
};

ShardFiles::ShardFiles(const std::string& dir, const Manifest& m, const std::vector<std::string>& names,
                       const std::vector<std::string_view>& prefixes)
    : impl_(new Impl{dir, m, {}}) {
  std::unique_ptr<Impl> guard(impl_);
  const std::vector<parallel::GridCoords> coords = tp_coords(m.grid);
  for (const std::string& name : names) {
    Impl::Source s;
    s.name = name;
    bool known = false;
    for (const parallel::GridCoords& at : coords)
      if (tp_file_name(at.x, at.y, at.z) == name) {
        s.at = at;
        known = true;
      }
    AXONN_CHECK_IO(known, "checkpoint '", dir, "': '", name, "' is not a file of the grid ", m.grid.str());
    s.map.emplace(source_map(dir, m, s.at));
    const std::string path = join(dir, name);
    s.file = std::make_unique<SafetensorsFile>(path);
    const SafetensorsFile& f = *s.file;
    // files written by this module say where they belong; they must agree with the manifest
    if (const std::string* format = metadata(f, "format")) {
      AXONN_CHECK_IO(*format == kShardFormat, "checkpoint '", dir, "': file '", name, "' has format '", *format,
                     "', not '", kShardFormat, "'");
      const std::pair<const char*, int> expect[] = {{"gx", m.grid.gx}, {"gy", m.grid.gy}, {"gz", m.grid.gz},
                                                    {"x", s.at.x},     {"y", s.at.y},     {"z", s.at.z}};
      for (const auto& [key, want] : expect) {
        const std::string* got = metadata(f, key);
        AXONN_CHECK_IO(got && *got == std::to_string(want), "checkpoint '", dir, "': file '", name, "' says ", key,
                       " = ", got ? *got : "(nothing)", ", but the manifest's grid ", m.grid.str(), " gives ", want,
                       ": the file belongs to another checkpoint");
      }
      // the model and the step each file records must be the manifest's: an edited manifest (say
      // num_heads) would otherwise change the model --resume trains and convert writes
      const std::pair<const char*, int64_t> model[] = {{"num_layers", m.model.num_layers},
                                                       {"num_heads", m.model.num_heads},
                                                       {"channels", m.model.channels},
                                                       {"vocab_size", m.model.vocab_size},
                                                       {"padded_vocab_size", m.model.padded_vocab_size},
                                                       {"max_seq_len", m.model.max_seq_len},
                                                       {"step", m.step}};
      for (const auto& [key, want] : model) {
        const std::string* got = metadata(f, key);
        AXONN_CHECK_IO(!got || *got == std::to_string(want), "checkpoint '", dir, "': file '", name, "' records ",
                       key, " = ", *got, ", but the manifest says ", want,
                       ": the manifest was edited or belongs to another checkpoint");
      }
    }
    const model::ModelSpec& spec = s.map->spec();
    for (std::string_view prefix : prefixes) {
      for (int p = 0; p < static_cast<int>(spec.params.size()); p++) {
        const std::string tname = std::string(prefix) + "." + spec.params[static_cast<size_t>(p)].name;
        const TensorInfo* t = f.find(tname);
        if (!t && prefix != kParamsPrefix)
          throw IoError("checkpoint '" + dir + "': file '" + name + "' has no tensor '" + tname +
                        "': a weights-only checkpoint (no optimizer state) cannot be resumed; start from its "
                        "weights with --init instead");
        AXONN_CHECK_IO(t, "checkpoint '", dir, "': file '", name, "' has no tensor '", tname, "'");
        AXONN_CHECK_IO(t->dtype == DType::kF32, "checkpoint '", dir, "': tensor '", tname, "' of file '", name,
                       "' is ", safetensors_dtype_name(t->dtype), ", not F32");
        // the shard shape of the checkpoint's grid; a one-rank file may hold the full llm.c shapes
        const Shape want = s.map->shard_shape(p);
        std::vector<int64_t> want_dims;
        for (int d = 0; d < want.ndim(); d++) want_dims.push_back(want[d]);
        const bool per_layer = spec.params[static_cast<size_t>(p)].per_layer;
        const bool same_numel = t->numel() == want.numel() &&
                                (!per_layer || (!t->shape.empty() && t->shape[0] == m.model.num_layers));
        AXONN_CHECK_IO(t->shape == want_dims || same_numel, "checkpoint '", dir, "': tensor '", tname, "' of file '",
                       name, "' has shape ", t->shape_str(), "; grid ", m.grid.str(), " at (", s.at.x, ",", s.at.y,
                       ",", s.at.z, ") gives ", want.str());
      }
    }
    impl_->sources.push_back(std::move(s));
  }
  guard.release();
}

ShardFiles::~ShardFiles() { delete impl_; }

uint64_t ShardFiles::bytes() const {
  uint64_t b = 0;
  for (const auto& s : impl_->sources) b += s.file->file_bytes();
  return b;
}

void ShardFiles::read(std::string_view prefix, const model::ShardMap& target, Arena& dst, Progress* progress) const {
  const Manifest& m = impl_->manifest;
  const model::ModelSpec& spec = target.spec();
  const int n_tensors = static_cast<int>(spec.params.size());
  AXONN_CHECK(dst.size() == spec.params.size(), "arena '", dst.name(), "' has ", dst.size(), " slots, not ",
              n_tensors);
  const int L = m.model.num_layers;
  for (int p = 0; p < n_tensors; p++) {
    const int i = p;
    Tensor out = dst.tensor(static_cast<size_t>(i));
    AXONN_CHECK(out.dtype() == DType::kF32 && out.numel() == target.shard_shape(p).numel(), "slot ", i, " of '",
                dst.name(), "' holds ", out.numel(), " elements; the shard has ", target.shard_shape(p).numel());
  }

  if (same_tensor_parallel_grid(m.grid, target.shape())) {
    const Impl::Source* s = impl_->find(target.coords());
    AXONN_CHECK(s != nullptr, "the file of this rank's coordinate was not opened");
    for (int i = 0; i < n_tensors; i++) {
      Tensor out = dst.tensor(static_cast<size_t>(i));
      std::memcpy(out.data(), impl_->data(*s, prefix, i), out.bytes());
      if (progress) progress->add(static_cast<int64_t>(out.bytes()));
    }
    return;
  }

  // Resharding: per tensor and layer, the full layer slice from the files (replicas read once),
  // then this rank's shard of it.
  std::vector<float> full;
  for (int p = 0; p < n_tensors; p++) {
    const int i = p;
    std::vector<const Impl::Source*> from;
    int64_t covered = 0;
    for (const Impl::Source& s : impl_->sources)
      if (!s.map->is_replica(p)) {
        from.push_back(&s);
        covered += s.map->shard_layer_numel(p);
      }
    const int64_t full_n = target.full_layer_numel(p);
    AXONN_CHECK(covered == full_n, "the files' shards of ", spec.params[static_cast<size_t>(p)].name, " cover ", covered,
                " elements of ", full_n, ": resharding needs every file of the checkpoint");
    full.assign(static_cast<size_t>(full_n), 0.0f);
    const int layers = spec.params[static_cast<size_t>(p)].per_layer ? L : 1;
    const int64_t out_n = target.shard_layer_numel(p);
    float* out = dst.tensor(static_cast<size_t>(i)).f32();
    for (int l = 0; l < layers; l++) {
      for (const Impl::Source* s : from) {
        const model::ShardMap& a = *s->map;
        const int64_t n = a.shard_layer_numel(p);
        const std::byte* src = impl_->data(*s, prefix, p) + static_cast<size_t>(l) * static_cast<size_t>(n) * 4;
        float* f = full.data();
        for (int64_t j = 0, len = 0; j < n; j += len) {
          len = a.run_length(p, j);
          std::memcpy(f + a.global_index(p, j), src + j * 4, static_cast<size_t>(len) * 4);
        }
      }
      float* o = out + static_cast<int64_t>(l) * out_n;
      const float* f = full.data();
      for (int64_t j = 0, len = 0; j < out_n; j += len) {
        len = target.run_length(p, j);
        std::memcpy(o + j, f + target.global_index(p, j), static_cast<size_t>(len) * 4);
      }
      if (progress) progress->add(out_n * 4);
    }
  }
}

namespace {

// The progress of a checkpoint's bytes: a bar on a terminal, plain lines in logs; no summary line (the
// trainer logs its own).
ProgressOptions progress_options() {
  ProgressOptions o;
  o.unit = "B";
  o.summary = false;
  return o;
}

}  // namespace

// --- save ----------------------------------------------------------------------------------------

SaveResult save_sharded(const std::string& root, Manifest man, const parallel::Grid& grid, const Arena& params,
                        const Arena* adam_m, const Arena* adam_v, int keep,
                        const std::vector<std::pair<std::string, std::string>>& carry) {
  Timer timer;
  AXONN_CHECK_ARG((adam_m == nullptr) == (adam_v == nullptr), "save_sharded needs both AdamW moments or neither");
  comm::Communicator& world = grid.world();
  const parallel::GridShape& s = grid.shape();
  const parallel::GridCoords& at = grid.coords();
  man.grid = {s.gx, s.gy, s.gz, s.gdata};
  man.files.clear();

  // 1. rank 0 makes a fresh staging directory; the others wait for it
  std::exception_ptr err;
  const std::string tmp = staging_dir(root, man.step);
  std::vector<FileEntry> carried;
  if (world.rank() == 0) {
    try {
      begin_checkpoint(root, man.step);
      for (const auto& [name, contents] : carry) {
        const FileDigest d = write_file_atomic(join(tmp, name), contents);
        carried.push_back(FileEntry{name, d.bytes, d.xxh3});
      }
    } catch (...) {
      err = std::current_exception();
    }
  }
  agree_on_errors(world, err);

  // 2. data rank 0 of each tensor-parallel coordinate writes its file (world rank 0 shows its progress; the
  // caller logs the summary)
  uint64_t mine[2] = {0, 0};
  if (at.d == 0) {
    try {
      SafetensorsWriter w;
      add_shard_metadata(w, man, at.x, at.y, at.z);
      add_arena(w, kParamsPrefix, params);
      if (adam_m) {
        add_arena(w, kAdamMPrefix, *adam_m);
        add_arena(w, kAdamVPrefix, *adam_v);
      }
      Progress progress("checkpoint save", static_cast<int64_t>(w.data_bytes()), progress_options());
      FileEntry e = write_checkpoint_file(tmp, tp_file_name(at.x, at.y, at.z), w, &progress);
      mine[0] = e.bytes;
      mine[1] = e.xxh3;
    } catch (...) {
      err = std::current_exception();
    }
  }
  agree_on_errors(world, err);

  // 3. the entries go to every rank (rank 0 commits; the others report the size)
  std::vector<uint64_t> all(2 * static_cast<size_t>(world.size()));
  world.all_gather(mine, all.data(), 2, DType::kI64);
  SaveResult r;
  for (const parallel::GridCoords& c : tp_coords(man.grid)) {
    const size_t rank = static_cast<size_t>(parallel::grid_rank(s, c));
    man.files.push_back(FileEntry{tp_file_name(c.x, c.y, c.z), all[2 * rank], all[2 * rank + 1]});
    r.bytes += all[2 * rank];
  }
  for (const FileEntry& f : carried) {  // rank 0's alone, which commits
    man.files.push_back(f);
    r.bytes += f.bytes;
  }
  if (world.rank() == 0) {
    try {
      commit_checkpoint(root, man, keep);
    } catch (...) {
      err = std::current_exception();
    }
  }
  agree_on_errors(world, err);
  r.dir = step_dir(root, man.step);
  r.seconds = timer.seconds();
  return r;
}

// --- load ----------------------------------------------------------------------------------------

LoadResult load_sharded(const std::string& path, const parallel::Grid& grid, const model::GptConfig& expected,
                        Arena& params, Arena* adam_m, Arena* adam_v) {
  Timer timer;
  AXONN_CHECK_ARG((adam_m == nullptr) == (adam_v == nullptr), "load_sharded needs both AdamW moments or neither");
  LoadResult r;
  std::unique_ptr<ShardFiles> files;
  std::optional<model::ShardMap> target;
  std::exception_ptr err;
  // world rank 0's progress: its files hashed, then its shards filled (the caller logs the summary)
  const uint64_t state_bytes = params.bytes() + (adam_m ? adam_m->bytes() + adam_v->bytes() : 0);
  std::optional<Progress> progress;
  // 1. every rank checks everything it will read
  try {
    r.dir = resolve_checkpoint(path);
    r.manifest = read_manifest(r.dir);
    check_model_config(r.manifest, expected, r.dir);
    target.emplace(expected, grid.shape(), grid.coords());
    const std::vector<std::string> names = files_to_read(r.dir, r.manifest, *target);
    r.resharded = !same_tensor_parallel_grid(r.manifest.grid, grid.shape());
    // Resharding, every rank reads every file: each hashes its share of them, and the agreement
    // below covers them all (the ranks share one file system, as saving already requires).
    std::vector<std::string> to_hash;
    const comm::Communicator& world = grid.world();
    for (size_t i = 0; i < names.size(); i++)
      if (!r.resharded || static_cast<int>(i % static_cast<size_t>(world.size())) == world.rank())
        to_hash.push_back(names[i]);
    uint64_t hash_bytes = 0;
    for (const FileEntry& f : r.manifest.files)
      if (std::find(to_hash.begin(), to_hash.end(), f.name) != to_hash.end()) hash_bytes += f.bytes;
    progress.emplace("checkpoint load", static_cast<int64_t>(hash_bytes + state_bytes), progress_options());
    if (!to_hash.empty())
      for (const FileStatus& st : check_checkpoint_files(r.dir, r.manifest, to_hash, &*progress))
        AXONN_CHECK_IO(st.ok(), "checkpoint '", r.dir, "': file '", st.entry.name, "' ", st.problem);
    std::vector<std::string_view> prefixes = {kParamsPrefix};
    if (adam_m) prefixes.insert(prefixes.end(), {kAdamMPrefix, kAdamVPrefix});
    files = std::make_unique<ShardFiles>(r.dir, r.manifest, names, prefixes);
    r.bytes_read = files->bytes();
  } catch (...) {
    err = std::current_exception();
  }
  // 2. nobody changes anything unless every rank can load
  agree_on_errors(grid.world(), err);
  // 3. the state
  try {
    files->read(kParamsPrefix, *target, params, &*progress);
    if (adam_m) {
      files->read(kAdamMPrefix, *target, *adam_m, &*progress);
      files->read(kAdamVPrefix, *target, *adam_v, &*progress);
    }
  } catch (...) {
    err = std::current_exception();
  }
  agree_on_errors(grid.world(), err);
  r.seconds = timer.seconds();
  return r;
}

Manifest load_consolidated_params(const std::string& path, Arena& full, std::string* dir_out, Progress* progress) {
  const std::string dir = resolve_checkpoint(path);
  Manifest m = read_manifest(dir);
  model::ShardMap one(m.model, {1, 1, 1, 1}, {0, 0, 0, 0});
  const std::vector<std::string> names = files_to_read(dir, m, one);
  for (const FileStatus& st : check_checkpoint_files(dir, m, names, progress))
    AXONN_CHECK_IO(st.ok(), "checkpoint '", dir, "': file '", st.entry.name, "' ", st.problem);
  ShardFiles files(dir, m, names, {kParamsPrefix});
  model::reserve_params(full, one.spec());
  full.allocate();
  files.read(kParamsPrefix, one, full, progress);
  if (dir_out) *dir_out = dir;
  return m;
}

void gather_full_params(const parallel::Grid& grid, const model::GptConfig& config, const Arena& shard, Arena* full) {
  const parallel::GridShape& g = grid.shape();
  comm::Communicator& xyz = grid.xyz();
  const bool sends = grid.coords().d == 0;  // data replicas hold the same shards: the first one sends
  const bool root = sends && xyz.rank() == 0;
  AXONN_CHECK(root == (full != nullptr), "gather_full_params: a full arena on the gathering rank only");
  const model::ShardMap mine(config, g, grid.coords());
  std::vector<model::ShardMap> from;  // the root: each XYZ member's map, in group order
  if (root) {
    for (int r : parallel::grid_group_members(g, grid.rank(), parallel::GridGroup::kXYZ))
      from.emplace_back(config, g, parallel::grid_coords(g, r));
    model::reserve_params(*full, mine.spec());
    full->allocate();
  }
  const int members = xyz.size();
  std::vector<size_t> send_counts(static_cast<size_t>(members), 0), recv_counts(send_counts.size(), 0);
  std::vector<float> recv;
  for (int p = 0; p < static_cast<int>(mine.size()); p++) {
    const model::ParamSpec& ps = mine.spec().params[static_cast<size_t>(p)];
    const int64_t layers = ps.per_layer ? ps.shape[0] : 1;
    const int64_t n = mine.shard_layer_numel(p);
    send_counts[0] = sends && !mine.is_replica(p) ? static_cast<size_t>(n) : 0;
    size_t total = 0;
    for (int r = 0; r < members && root; r++) {
      const model::ShardMap& a = from[static_cast<size_t>(r)];
      recv_counts[static_cast<size_t>(r)] = a.is_replica(p) ? 0 : static_cast<size_t>(a.shard_layer_numel(p));
      total += recv_counts[static_cast<size_t>(r)];
    }
    recv.resize(total);
    const float* src = shard.tensor(static_cast<size_t>(p)).f32();
    for (int64_t l = 0; l < layers; l++) {
      xyz.all_to_all_v(src + l * n, send_counts, recv.data(), recv_counts, DType::kF32);
      if (!root) continue;
      float* f = full->tensor(static_cast<size_t>(p)).f32() + l * mine.full_layer_numel(p);
      const float* in = recv.data();
      for (int r = 0; r < members; r++) {
        const model::ShardMap& a = from[static_cast<size_t>(r)];
        const auto m = static_cast<int64_t>(recv_counts[static_cast<size_t>(r)]);
        for (int64_t j = 0, len = 0; j < m; j += len) {
          len = a.run_length(p, j);
          std::memcpy(f + a.global_index(p, j), in + j, static_cast<size_t>(len) * 4);
        }
        in += m;
      }
    }
  }
}

}  // namespace axonn::checkpoint
