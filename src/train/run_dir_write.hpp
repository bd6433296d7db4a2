// train/run_dir_write.hpp (private to the train module) — what train::run does with a run directory
// (--run-dir): made and checked on every rank before the session, the run's record written by rank 0
// before step 1 (train/run_dir.hpp has the layout).
#pragma once

#include <string>

#include "axonn/train/session.hpp"

namespace axonn::train::detail {

// Makes `dir` (and its parents) and checks that it takes new files: IoError saying what to change.
void make_run_dir(const std::string& dir);
// run.json: axonn's version and git commit, the start time, the machine (host, CPU, threads), the world
// size and the grid, and the libraries' versions (MPI, oneDNN, OpenBLAS, toml++, the compiler).
std::string run_info_json(const Session& s);
// config.toml (config_toml(as_given): the configuration as given, before with_run_dir_outputs) and
// run.json, each written atomically. Rank 0.
void write_run_dir(const Session& s, const TrainConfig& as_given);

}  // namespace axonn::train::detail
