// train/peak.hpp — MFU's denominator: the GEMM rate one rank can reach, and where that number comes from.
//
// MFU = model FLOPs of a step / step time / (peak per rank × ranks). A peak timed once, in a moment when
// the machine was busy, comes out low, and MFU then exceeds 1 (runs reported 105-135 %). So the peak is,
// in this order:
//  1. given (--peak-gflops);
//  2. the `local` profile's (`axonn calibrate` measures it as in 3, at more sizes and trials), when it
//     was measured on this CPU with as many ranks on the node and threads per rank as this run has;
//  3. measured now: the best of several timings at several sizes (kernels::measure_gemm_peak) on every
//     rank at once, since in the run the ranks share the node's cores and memory; the fastest rank's.
// A disturbance only ever lowers a timing, so each best is the least disturbed one. The peak is chosen
// once, at the start, named in the log and the run's records, and never changed: a step that runs faster
// than it (MfuPeak::observe) is said once, with its MFU above 100 %, because it means the peak is wrong
// (raising the peak to the fastest step, as before, made small runs report 100 %, issue 35).
//
//   train::MfuPeak peak = train::resolve_mfu_peak(c.peak_gflops, bf16, gpu, world);
//   log_info("peak %.1f GFLOP/s (%s)", peak.gflops_per_rank, peak.source.c_str());
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "axonn/comm/communicator.hpp"

namespace axonn::train {

struct MfuPeak {
  MfuPeak() = default;
  MfuPeak(double gflops, std::string where) : gflops_per_rank(gflops), source(std::move(where)) {}

  double gflops_per_rank = 0;
  std::string source;  // what was measured or given, and where: for the log and the run's records
  bool said_above = false;  // a step above the peak has been reported

  // MFU of a step that did `flops` (all ranks together) in `seconds` on `ranks` ranks, against the fixed
  // peak. The first step faster than the peak is reported (a warning): its MFU and later ones may exceed 1.
  double observe(double flops, double seconds, int ranks, int64_t step);
};

// Sizes and timings per size of the peak measured at the start of a run (quick: a fraction of a second),
// and of `axonn calibrate` and the benchmarks (more thorough).
inline const std::vector<int> kRunPeakSizes = {1024, 1536};
constexpr int kRunPeakTrials = 3;
inline const std::vector<int> kThoroughPeakSizes = {1024, 1536, 2048};
constexpr int kThoroughPeakTrials = 5;

// The CPU GEMM peak per rank, GFLOP/s, measured on every rank of `world` at once (collective): each
// rank's best over `trials` timings of each size, then the fastest rank's.
double measure_cpu_peak_gflops(comm::Communicator& world, bool bf16, const std::vector<int>& sizes, int trials);

// The peak a run reports MFU against (1-3 above; collective over `world`). `given_gflops` > 0 is
// --peak-gflops; `gpu`: a dense bf16 GEMM on the device measured now.
MfuPeak resolve_mfu_peak(double given_gflops, bool bf16, bool gpu, comm::Communicator& world);

}  // namespace axonn::train
