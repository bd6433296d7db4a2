// planner/calibration.hpp — from measurements to a machine profile (`axonn calibrate`).
//
// `axonn calibrate` (tools/axonn/cmd_calibrate.cpp) measures under MPI; this part, which needs no
// MPI, fits the cost model's parameters to what was measured and writes the profile JSON that
// load_machine_profile reads back (docs/perf-model.md §4.1 maps every field):
//  * a collective at one position — kind, ip (spacing of the group's ranks), size p — timed at
//    several message sizes M: t(M) = c·(p−1)·α + c·(p−1)/p·M/β (c = 2 all-reduce, else 1), the
//    planner's own formula; β and α by least squares on the relative error;
//  * sgemm timed on several shapes: t = t_call + 2·m·n·k / R.
//
//   planner::Calibration c;  ...fill from measurements...
//   c.collectives.push_back(planner::fit_collective(CollectiveKind::kAllReduce, 1, 4, samples));
//   c.gemm_fit = planner::fit_gemm(c.gemm);
//   std::string json = planner::calibration_profile_json(c);
#pragma once

#include <string>
#include <vector>

#include "axonn/planner/machine.hpp"

namespace axonn::planner {

struct CollectiveSample {
  double bytes = 0;    // M: the full message (all-reduce buffer, gathered or scattered total)
  double seconds = 0;  // per call, every group of this position running at once
};

struct CollectiveFit {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  long ip = 1, size = 2;
  bool intra_node = true;  // every group of this position stays inside a node
  bool async = false;      // timed as *_async + wait (the trainer's form for overlappable collectives)
  double gbs = 0;          // β, GB/s (10^9 bytes/s), bus bandwidth as nccl-tests counts it
  double latency_us = 0;   // α per ring step
  double max_rel_error = 0;  // of the fit over the samples
  std::vector<CollectiveSample> samples;
};

// Fits β and α to the samples (at least one; sizes > 0, times > 0): weighted least squares of
// t = a + b·M with weights 1/t² (every size counts alike), a >= 0, b > 0; β = c·(p−1)/p / b,
// α = a / (c·(p−1)). Throws axonn::InvalidArgument on empty or non-positive samples.
CollectiveFit fit_collective(CollectiveKind kind, long ip, long size, std::vector<CollectiveSample> samples);

struct GemmSample {
  long m = 0, n = 0, k = 0;
  double seconds = 0;  // per call
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};
struct GemmFit {
  double gflops = 0;   // R
  double call_us = 0;  // t_call
  double max_rel_error = 0;
};
// Fits t = t_call + flops / R the same way. Throws axonn::InvalidArgument on empty samples.
GemmFit fit_gemm(const std::vector<GemmSample>& samples);

// Everything `axonn calibrate` measured on one allocation.
struct Calibration {
  std::string name = "local";
  std::string date;   // ISO 8601, UTC
  std::string host;   // rank 0's host name
  std::string cpu;    // processor model
  long ranks = 1, nodes = 1, ranks_per_node = 1, threads_per_rank = 1;
  std::string gemm_backend;  // "onednn" | "openblas"
  bool quick = false;
  double memory_gib = 0;  // per rank: the node's memory / ranks on it
  double sync_us = 0;     // extra cost of a collective between computations (network.sync_us)
  double stream_gbs = 0;  // memory-bound kernels' bandwidth per rank (AdamW), every rank at once
  // the share of a non-blocking all-reduce's time that a GEMM burst running meanwhile covered, inside
  // a node and across nodes (recorded as calibration.overlap, not applied; < 0: not measured)
  double intra_node_overlap = -1, inter_node_overlap = -1;
  std::vector<GemmSample> gemm;
  GemmFit gemm_fit;
  // MFU's peaks per rank (train/peak.hpp: the best GEMM rate over trials and sizes, every rank at once,
  // the fastest rank's), GFLOP/s, and the bf16 GEMM that ran
  double mfu_peak_fp32_gflops = 0, mfu_peak_bf16_gflops = 0;
  std::string bf16_gemm;
  std::vector<CollectiveFit> collectives;
};

// The profile in the planner's format (implementation axonn-cpp; one table rule per fitted
// position and collective, with its α), plus a "calibration" object with the raw samples. Throws
// axonn::InvalidArgument when the calibration lacks what the format requires (a GEMM fit, memory,
// stream bandwidth).
std::string calibration_profile_json(const Calibration& c);

}  // namespace axonn::planner
