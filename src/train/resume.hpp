// train/resume.hpp (private to the train module) — the configuration a checkpoint records, and what
// --resume restores from it.
//
// Every setting that shapes a run is recorded in the manifest's "extra" (one string each), so that
// `axonn train --checkpoint-dir DIR --resume` with no other flag continues exactly the run that wrote
// DIR. A flag given on the resuming command line wins only where that is safe:
//   kSafe        more --steps, another --grid (resharded), other kernels, overlap, micro-batches, where
//                checkpoints, metrics and validation go: the new value is used and reported;
//   kTrajectory  the data, the seed, the batch and sequence length, the optimizer and its schedule, the
//                precision: a new value would silently make another run from here on, so it is
//                refused unless --allow-config-change (then used, with a warning per setting).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/train/config.hpp"

namespace axonn::train::detail {

// The settings a checkpoint records (manifest "extra", besides adam_steps and resumed_from).
std::map<std::string, std::string> run_settings(const TrainConfig& c);

// The integer `key` of the manifest's extra, parsed strictly (the whole text, in [lo, hi]); `fallback`
// when absent. IoError naming the checkpoint and the value otherwise.
int64_t recorded_int(const checkpoint::Manifest& m, const std::string& key, int64_t lo, int64_t hi,
                     const std::string& dir, int64_t fallback);

// The configuration that continues the checkpoint `m` (read from `dir`), from what was given: the
// recorded settings, except the given flags (c.given; nullopt: all). Logs what was restored and what
// changed; throws InvalidArgument for a trajectory change without allow_config_change, or a grid that
// cannot be restored on `world_size` ranks; IoError for a malformed recorded value.
TrainConfig restore_config(const TrainConfig& c, const checkpoint::Manifest& m, const std::string& dir, int world_size);

}  // namespace axonn::train::detail
