// measure/comm_bench.hpp — `axonn bench comm` and `axonn bench overlap`.
//
// comm: an nccl-tests-style size sweep of all-reduce, all-gather and reduce-scatter over every
// distinct group of a 4D grid, every group of a kind at once; time = max over ranks of the mean time
// per call (best round), algbw and busbw (nccl-tests' factors, the planner's), and every point's result
// checked against closed-form values (#wrong).
// overlap: how much of a non-blocking collective over the world hides behind a long computation that
// never calls MPI, for each progress mode (none, or the progress thread at a poll interval).
//
// Both are collective over comm::world(), print their table on rank 0 and return the exit code
// (1 when a result was wrong). Bad options throw InvalidArgument on every rank alike.
#pragma once

#include <cstdint>
#include <string>

namespace axonn::measure {

struct CommBenchOptions {
  std::string grid;
  std::string grid_order;  // --grid-order (empty: x,y,z)
  int64_t min_bytes = 4096;
  int64_t max_bytes = 32 << 20;
  int step_factor = 2;
  std::string dtype = "fp32";  // parse_precision: fp32 (f32) or bf16
  int warmup = 3;
  int iters = 10;
  int rounds = 1;
  bool async = false;
};

int run_comm_bench(const CommBenchOptions& o);

struct OverlapOptions {
  std::string op = "all_reduce";
  int64_t bytes = 32 << 20;
  int gemm_n = 1024;
  int threads = 1;
  int reps = 9;
  std::string modes = "none,thread:0,thread:50,thread:1000";
};

int run_overlap_bench(const OverlapOptions& o);

}  // namespace axonn::measure
