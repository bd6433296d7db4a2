// checkpoint/checkpoint_dir.hpp — checkpoint directories: layout, manifest, atomic commit, lookup.
//
// A checkpoint root holds one directory per saved step and a pointer to the newest:
//
//   ROOT/
//     latest                        "step-00000200\n", replaced atomically, written last
//     lock                          held by the run that writes here (DirectoryLock)
//     step-00000100/                a complete checkpoint (kept by --keep)
//     step-00000200/
//       manifest.json               model config, grid, step, tokens, loader, RNG, version, files
//       tp-x0-y0-z0.safetensors     one file per tensor-parallel coordinate (x, y, z)
//       ...
//     step-00000300.tmp/            a save in progress (or interrupted by a crash): never read
//
// Saving (no MPI here; the trainer adds the barriers and the gather of FileEntry):
//   1. one rank:    std::string tmp = begin_checkpoint(root, step);      // fresh ROOT/step-N.tmp/
//      -- barrier --
//   2. each writer: FileEntry e = write_checkpoint_file(tmp, tp_file_name(x, y, z), writer);
//      -- gather every FileEntry to the committing rank, barrier --
//   3. that rank:   commit_checkpoint(root, manifest_with_those_files, keep);
// commit writes manifest.json into the .tmp directory, renames it to step-N (the commit point: a
// crash before it leaves the previous checkpoint as the latest, a crash after it the new one), then
// replaces `latest` and prunes old steps.
//
// Loading: resolve_checkpoint(path) (a root → its latest step; a step directory → itself), then
// verify_checkpoint(dir) parses the manifest and checks every file's size and checksum, throwing an
// IoError that names the file and the problem before the caller changes any state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::checkpoint {

// Version of the manifest's schema; loading refuses newer ones. Version 2 adds the manifest's own
// checksum ("manifest_xxh3"); version 1 manifests (older axonn) have none and are still read.
constexpr int kManifestVersion = 2;
constexpr std::string_view kManifestName = "manifest.json";
constexpr std::string_view kLatestName = "latest";

// "axonn 0.1.0": the library that wrote a checkpoint.
std::string library_version();

// The grid a checkpoint was written on (the extents of parallel::Grid; kept here as plain ints so
// that this layer needs no MPI).
struct GridExtent {
  int gx = 1, gy = 1, gz = 1, gdata = 1;
  std::string str() const;  // "2x1x2x1"
  bool operator==(const GridExtent&) const = default;
};

// Where the data loader stands: the next batch starts at token `position` of shard `shard`.
struct LoaderPosition {
  int64_t shard = 0;
  int64_t position = 0;
};

// Random-number state to resume with. The model's initialisation is counter-based (seed, tensor,
// index), so seed + counter describe it; `engine` holds a serialised std:: engine (its operator<<
// text) for anything stateful, e.g. a data shuffler. All optional.
struct RngState {
  uint64_t seed = 0;
  uint64_t counter = 0;
  std::string engine;
};

// One file of a checkpoint, as the manifest lists it.
struct FileEntry {
  std::string name;  // relative to the step directory, e.g. "tp-x0-y0-z0.safetensors"
  uint64_t bytes = 0;
  uint64_t xxh3 = 0;  // XXH3-64 of the whole file
};

// Everything a checkpoint records besides the tensors.
struct Manifest {
  int format_version = kManifestVersion;
  std::string library_version = checkpoint::library_version();
  model::GptConfig model;
  GridExtent grid;
  int64_t step = 0;         // optimizer steps completed: resuming runs step `step` next
  int64_t tokens_seen = 0;  // global tokens consumed so far
  LoaderPosition loader;
  RngState rng;
  // Free-form settings the trainer wants to record or check on resume (e.g. "data", "lr_schedule").
  std::map<std::string, std::string> extra;
  std::vector<FileEntry> files;
};

// JSON text of a manifest (pretty-printed, stable key order), and back. The text ends with
// "manifest_xxh3": the XXH3-64 of the text without that field. Parsing checks every field's presence
// and type, then (version 2) that checksum, so an edited or corrupted manifest is refused; errors are
// IoError "manifest 'WHERE': PROBLEM".
std::string manifest_to_json(const Manifest& m);
Manifest manifest_from_json(std::string_view text, const std::string& where);

// --- names ---------------------------------------------------------------------------------------

// "step-00000100" (at least 8 digits); parse_step_dir_name gives the step back for exactly that
// pattern (no ".tmp" or other suffix), nullopt otherwise.
std::string step_dir_name(int64_t step);
std::optional<int64_t> parse_step_dir_name(std::string_view name);
// ROOT/step-N and ROOT/step-N.tmp.
std::string step_dir(const std::string& root, int64_t step);
std::string staging_dir(const std::string& root, int64_t step);
// "tp-x{X}-y{Y}-z{Z}.safetensors": the file of tensor-parallel coordinate (x, y, z); written by data
// rank 0 of that coordinate.
std::string tp_file_name(int x, int y, int z);

// --- saving --------------------------------------------------------------------------------------

// Creates ROOT (and parents) if needed and a fresh, empty ROOT/step-N.tmp/, removing one a crashed
// save left. Returns its path. One rank calls it; the others wait at a barrier before writing.
std::string begin_checkpoint(const std::string& root, int64_t step);

// Writes one safetensors file into the staging directory, atomically, and returns its entry (size
// and hash computed while writing). Any rank, any number of files; names must be plain file names.
FileEntry write_checkpoint_file(const std::string& staging, const std::string& name, const SafetensorsWriter& w,
                                Progress* progress = nullptr);

// Commits the save of `manifest.step` begun by begin_checkpoint: checks that every file the
// manifest lists is in the staging directory with its size (a rank that failed to write is caught
// here), writes manifest.json, fsyncs, renames ROOT/step-N.tmp to ROOT/step-N, replaces `latest`,
// then prunes to the `keep` newest steps (0 keeps all; stale .tmp directories go too). Returns the
// step directory. Throws IoError (nothing is renamed) if a file is missing or has the wrong size.
std::string commit_checkpoint(const std::string& root, const Manifest& manifest, int keep = 0);

// Removes all but the `keep` newest complete steps (keep >= 1; never the one `latest` names) and any
// leftovers of interrupted saves or removals. Each removal renames first, so a crash mid-way never
// leaves a half-deleted directory under a step name.
void prune_checkpoints(const std::string& root, int keep);

// Removes every step of ROOT (committed or left by an interrupted save), `latest` and its temporary:
// what `axonn train --overwrite` deletes of another run's checkpoint directory, and nothing else
// (the lock, and files that are not checkpoints, stay). Returns how many steps it removed.
int remove_all_checkpoints(const std::string& root);

// The run that writes into a checkpoint root holds its lock (ROOT/lock, an fcntl write lock, which
// also works on NFS): two runs saving into one root at once would race (one could report a
// checkpoint saved that the other's pruning or replacement broke). The lock file says who holds it;
// the lock ends with the holder (its process, even if killed). One rank per job takes it. A run
// directory is locked the same way (train/run_dir.hpp). The lock file is never a link followed out
// of ROOT (O_NOFOLLOW: a planted link is refused, its target untouched).
class DirectoryLock {
 public:
  // Creates ROOT if needed and takes the lock; IoError naming the holder ("pid P on host H since T")
  // if another process has it, or if ROOT cannot be created. `what` names ROOT in messages with the
  // flag that gave it ("checkpoint directory", "--run-dir").
  explicit DirectoryLock(const std::string& root, const std::string& what = "checkpoint directory",
                         const std::string& flag = "--checkpoint-dir");
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};
constexpr std::string_view kLockName = "lock";

// --- finding and loading ---------------------------------------------------------------------------

// Steps of ROOT that are committed (a step-N directory with a manifest.json), ascending. An absent
// ROOT has none.
std::vector<int64_t> list_checkpoints(const std::string& root);
// DIR is a checkpoint directory: a step directory (manifest.json), or a root with a committed step or a
// `latest` pointer. No Hugging Face model directory is written into one (checkpoint/hf.hpp, save_hf_dir), and
// one that holds both is refused as a model source (checkpoint/model_source.hpp): --init would read the HF
// files in the checkpoints' place, whatever step they have reached since.
bool holds_checkpoints(const std::string& dir);
// The step directory to resume from: the one `latest` names, which must be committed (IoError if it
// is missing, incomplete or `latest` is malformed: never an older step in its place); without a
// `latest` (a crash before the first pointer, or a deleted one) the newest committed step; nullopt if
// there is none. Does not verify checksums.
std::optional<std::string> find_latest(const std::string& root);
// A path given by the user: a step directory (has manifest.json) is returned as is; a root resolves
// to find_latest. Throws IoError saying what is wrong otherwise (missing, an unfinished .tmp save, a
// directory with no checkpoint).
std::string resolve_checkpoint(const std::string& path);

// Reads and parses DIR/manifest.json (no checksums).
Manifest read_manifest(const std::string& dir);

// One file's verification result.
struct FileStatus {
  FileEntry entry;      // as the manifest lists it
  std::string problem;  // empty if the file is there with the listed size and hash
  bool ok() const { return problem.empty(); }
};
// Checks the files the manifest lists (or only those named in `only`): presence, size, hash. `progress`, if
// any, counts the bytes hashed.
std::vector<FileStatus> check_checkpoint_files(const std::string& dir, const Manifest& m,
                                               const std::vector<std::string>& only = {},
                                               Progress* progress = nullptr);
// read_manifest + check_checkpoint_files; throws IoError "checkpoint 'DIR': file 'F' PROBLEM" on
// the first bad file. `only` limits the (costly) hashing to the files this rank will read.
Manifest verify_checkpoint(const std::string& dir, const std::vector<std::string>& only = {});

// Throws IoError unless the checkpoint's model is `expected` (every shape field), e.g.
// "checkpoint 'DIR' is for L=12 ..., not L=24 ...".
void check_model_config(const Manifest& m, const model::GptConfig& expected, const std::string& dir);

// --- arenas <-> safetensors -------------------------------------------------------------------------

// Adds every tensor of `arena` as "PREFIX.SLOTNAME" (e.g. "params.wte", "adam_m.wte"); the arena must
// stay alive until w.write().
void add_arena(SafetensorsWriter& w, std::string_view prefix, const Arena& arena);
// Reads every slot of `arena` from "PREFIX.SLOTNAME", checking shapes and dtypes (IoError naming the
// file and the tensor).
void read_arena(const SafetensorsFile& f, std::string_view prefix, Arena& arena);

}  // namespace axonn::checkpoint
