// checkpoint/sharded.hpp — saving and loading a GPT's shards and AdamW state on a grid; resharding.
//
// A sharded checkpoint (docs/checkpoints.md) is a step directory of checkpoint_dir.hpp holding one
// safetensors file per tensor-parallel coordinate (x, y, z), written by data rank 0 of it:
//   params.<name>, adam_m.<name>, adam_v.<name>   that rank's shard of each of the model's tensors
//                                                 (model/spec.hpp: GPT-2's are llm.c's 16), shaped as
//                                                 model::ShardMap::shard_shape (= the slots of
//                                                 Gpt::params()), F32
//   __metadata__   format "axonn-shard", grid, the file's coordinates, the model's shape, step
// and the manifest (model, grid, step, tokens, loader position, RNG, settings, per-file XXH3).
// Which full-tensor element each shard element is follows from (model, grid, coordinates) alone
// (model::ShardMap), so a checkpoint written on one grid loads on any other the model admits.
//
//   // every rank, after step 200:
//   checkpoint::Manifest m;  m.model = cfg;  m.step = 200;  m.loader.position = loader.position();
//   checkpoint::save_sharded("run/ckpt", m, grid, gpt.params(), &opt.m(), &opt.v(), /*keep=*/3);
//   // later, on the same or another grid:
//   auto r = checkpoint::load_sharded("run/ckpt", grid, cfg, gpt.params(), &opt.m(), &opt.v());
//
// Loading is all-or-nothing: every rank checks what it will read (manifest, model, grid, presence,
// size and checksum of its files, every tensor's shape) and the ranks agree before any state is
// changed; a problem anywhere makes every rank throw the same IoError, naming the file and the problem.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/comm/communicator.hpp"
#include "axonn/model/shard_map.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::checkpoint {

// Tensor-name prefixes of the three states in a shard file.
constexpr std::string_view kParamsPrefix = "params";
constexpr std::string_view kAdamMPrefix = "adam_m";
constexpr std::string_view kAdamVPrefix = "adam_v";
// __metadata__ "format" of a shard file.
constexpr std::string_view kShardFormat = "axonn-shard";

struct SaveResult {
  std::string dir;      // the committed step directory
  uint64_t bytes = 0;   // all files of the step, every writer's together
  double seconds = 0;   // the whole collective save, commit included
};

// Collective over grid.world(). Saves checkpoint step `manifest.step` under `root`: rank 0 creates
// the staging directory; data rank 0 of each tensor-parallel coordinate writes its file (params and,
// when adam_m/adam_v are given, the moments; arenas laid out as Gpt::params() on this rank); the
// entries are gathered to rank 0, which commits (manifest, rename, `latest`, prune to `keep`; 0 keeps
// all). `manifest` gives model, step, tokens, loader, RNG and extra; grid and files are filled in
// here. `carry`: files rank 0 writes into the step, {name, contents} (the tokenizer's files), listed in the
// manifest with their checksums like the shards. A failure on any
// rank throws the same IoError on every rank, and the previous checkpoint stays the latest.
SaveResult save_sharded(const std::string& root, Manifest manifest, const parallel::Grid& grid, const Arena& params,
                        const Arena* adam_m, const Arena* adam_v, int keep = 0,
                        const std::vector<std::pair<std::string, std::string>>& carry = {});

struct LoadResult {
  std::string dir;          // the step directory read
  Manifest manifest;
  bool resharded = false;   // the checkpoint's tensor-parallel grid differs from this one
  uint64_t bytes_read = 0;  // by this rank (files it verified and read)
  double seconds = 0;
};

// Collective over grid.world(). Loads a checkpoint (`path`: a root, whose latest step is taken, or a
// step directory) into this rank's shards: params and, if adam_m and adam_v are given, the AdamW
// moments (the checkpoint must have them). On the same tensor-parallel grid (Gx, Gy, Gz; Gdata may
// differ) each rank reads its own coordinate's file; otherwise it reshards from every file. First
// the ranks verify what they will read (resharding, the files' checksums are shared out among the
// ranks) and agree; then the state is written. Throws
// IoError on every rank (nothing changed) for a missing, unfinished, incomplete, corrupt or truncated
// checkpoint, one of a model other than `expected`, or one whose grid does not divide its model.
LoadResult load_sharded(const std::string& path, const parallel::Grid& grid, const model::GptConfig& expected,
                        Arena& params, Arena* adam_m = nullptr, Arena* adam_v = nullptr);

// --- the pieces, without MPI ------------------------------------------------------------------------

// The __metadata__ of the shard file of coordinate (x, y, z): format, grid, coordinates, the model's
// shape and the step (from `m`).
void add_shard_metadata(SafetensorsWriter& w, const Manifest& m, int x, int y, int z);

// Files of the checkpoint (manifest `m`) that the rank `target` reads to load its shards: its own
// coordinate's file if the tensor-parallel grid is the same, else every file. Throws IoError if the
// manifest's grid does not divide its model or the manifest lists not exactly the grid's files.
std::vector<std::string> files_to_read(const std::string& dir, const Manifest& m, const model::ShardMap& target);

// The shard files of a verified checkpoint, opened (memory-mapped), with the checks of their
// structure: metadata (format, grid, coordinates) agreeing with the manifest, and every tensor of the
// requested states present with the shard shape the checkpoint's grid gives it.
class ShardFiles {
 public:
  // Opens `names` (from files_to_read) in `dir` and checks them for `prefixes`. IoError naming the
  // file and the problem.
  ShardFiles(const std::string& dir, const Manifest& m, const std::vector<std::string>& names,
             const std::vector<std::string_view>& prefixes);
  ~ShardFiles();
  ShardFiles(const ShardFiles&) = delete;
  ShardFiles& operator=(const ShardFiles&) = delete;

  // Writes state `prefix` into `dst` for the rank `target` describes: slot p of dst (the spec's order)
  // must have target.shard_shape(p)'s element count (any shape: a reserve_params arena for a
  // one-rank target). Copies directly when the grid matches, else builds each layer of each full
  // tensor from the files (reading replicated shards once) and takes target's shard of it.
  // `progress`, if any, counts the bytes of `dst` filled.
  void read(std::string_view prefix, const model::ShardMap& target, Arena& dst, Progress* progress = nullptr) const;

  uint64_t bytes() const;  // sum of the opened files' sizes

 private:
  struct Impl;
  Impl* impl_;
};

// Loads the parameters of a checkpoint directory (root or step), written on any grid, as full
// tensors (one rank's view): resolves, verifies every file, and fills `full` (reserved here with
// model::reserve_params and allocated). Returns the manifest. For `axonn convert` and tools.
// `progress`, if any, counts the bytes hashed and then the arena's bytes filled.
Manifest load_consolidated_params(const std::string& path, Arena& full, std::string* dir_out = nullptr,
                                  Progress* progress = nullptr);

// Gathers the model's full tensors to world rank 0 of `grid` (host buffers): per tensor and layer, the
// ranks of the first data replica's XYZ group send their shards (replicas of a tensor send nothing) to
// that group's rank 0 (all_to_all_v over xyz, the other counts 0), which places them by model::ShardMap.
// No rank but the root holds more than its shard and one layer's slice. `full`: on the root, filled
// (reserved here with model::reserve_params and allocated); null elsewhere. Collective over the grid.
void gather_full_params(const parallel::Grid& grid, const model::GptConfig& config, const Arena& shard, Arena* full);

// Makes every rank of `comm` agree on failure: each passes its own error (null if none); if any has
// one, every rank throws the lowest failing rank's error (same type, IoError or InvalidArgument,
// same message). Collective.
void agree_on_errors(comm::Communicator& comm, std::exception_ptr error);

}  // namespace axonn::checkpoint
