#include "axonn/train/peak.hpp"

#include <algorithm>
#include <optional>

#include "axonn/comm/runtime.hpp"
#include "axonn/core/host.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/planner/machine.hpp"
#include "axonn/launch/compute.hpp"

namespace axonn::train {

double MfuPeak::observe(double flops, double seconds, int ranks, int64_t step) {
  const double achieved = flops / seconds / static_cast<double>(ranks) * 1e-9;  // GFLOP/s per rank
  if (achieved > gflops_per_rank && !said_above) {
    said_above = true;
    log_warn("mfu       step %lld ran at %.1f GFLOP/s per rank, above the peak %.1f GFLOP/s (%s): the peak is wrong "
             "(timed in a busy moment, or given too low), and MFU reads above 100 %%. For a peak that holds, run "
             "`axonn calibrate` on an idle machine or give --peak-gflops",
             static_cast<long long>(step + 1), achieved, gflops_per_rank, source.c_str());
  }
  return achieved / gflops_per_rank;
}

double measure_cpu_peak_gflops(comm::Communicator& world, bool bf16, const std::vector<int>& sizes, int trials) {
  // every rank at once: a barrier over world before each timed product
  float best =
      static_cast<float>(kernels::measure_gemm_peak(bf16, sizes, trials, [&world] { world.barrier(); }).gflops);
  world.all_reduce(&best, 1, DType::kF32, comm::ReduceOp::kMax);  // over world
  return best;
}

namespace {

std::string sizes_str(const std::vector<int>& sizes) {
  std::string s;
  for (int n : sizes) {
    if (!s.empty()) s.push_back('/');
    s.append(std::to_string(n));
  }
  return s;
}

// The `local` profile's peak for this precision, when it was measured on this CPU with this run's ranks
// per node and threads per rank; nullopt otherwise (with why in `why`, for the log).
std::optional<MfuPeak> calibrated_peak(bool bf16, std::string& why) {
  const std::optional<std::string> file = planner::find_machine_profile_file("local");
  if (!file) {
    why = "no local profile: `axonn calibrate` keeps one";
    return std::nullopt;
  }
  planner::MachineProfile m;
  try {
    m = planner::load_machine_profile(*file);
  } catch (const InvalidArgument& e) {
    why = detail::concat("the local profile ", *file, " is unreadable (", e.what(), ")");
    return std::nullopt;
  }
  const planner::MachineProfile::CalibratedPeak& p = m.calibrated_peak;
  const long threads = kernels::cpu_threads(), ranks_per_node = comm::local_size();
  if (p.fp32_gflops <= 0) {
    why = detail::concat("the local profile ", *file, " has no MFU peak (calibrated by an older axonn)");
    return std::nullopt;
  }
  if (p.cpu != cpu_model() || p.threads_per_rank != threads || p.ranks_per_node != ranks_per_node) {
    why = detail::concat("the local profile ", *file, " was measured with ", p.ranks_per_node, " ranks x ",
                         p.threads_per_rank, " threads on '", p.cpu, "', this run has ", ranks_per_node,
                         " ranks x ", threads, " threads on '", cpu_model(), "'");
    return std::nullopt;
  }
  return MfuPeak{bf16 ? p.bf16_gflops : p.fp32_gflops,
                 detail::concat(bf16 ? "bf16 GEMM" : "sgemm", " from the local profile ", *file, ", axonn calibrate ",
                                p.date)};
}

}  // namespace

MfuPeak resolve_mfu_peak(double given_gflops, bool bf16, bool gpu, comm::Communicator& world) {
  AXONN_CHECK_ARG(given_gflops >= 0, "--peak-gflops must be >= 0 (0 = measure), got ", given_gflops);
  if (given_gflops > 0) return {given_gflops, "given, --peak-gflops"};
  if (gpu) {
    float tflops = static_cast<float>(launch::measure_gpu_bf16_tflops(8192, 3));
    world.all_reduce(&tflops, 1, DType::kF32, comm::ReduceOp::kMax);  // over world
    return {1e3 * tflops, "dense bf16 GEMM 8192^3 measured now, the fastest GPU's"};
  }
  // Every rank decides alike: they read the same profile file (one node) or profiles of the same
  // content; a rank that sees none would measure while the others wait. So the decision is agreed on.
  std::string why;
  std::optional<MfuPeak> calibrated = calibrated_peak(bf16, why);
  float found = calibrated ? 1.0f : 0.0f;
  world.all_reduce(&found, 1, DType::kF32, comm::ReduceOp::kSum);  // over world
  if (calibrated && found == static_cast<float>(world.size())) return *calibrated;
  const double gflops = measure_cpu_peak_gflops(world, bf16, kRunPeakSizes, kRunPeakTrials);
  return {gflops, detail::concat(bf16 ? "bf16 GEMM " + kernels::gemm_bf16_kernel() : std::string("sgemm"),
                                 " measured now: best of ", kRunPeakTrials, " timings at ", sizes_str(kRunPeakSizes),
                                 " on every rank at once, the fastest rank's; ", calibrated ? "not every rank has the local profile" : why)};
}

}  // namespace axonn::train
