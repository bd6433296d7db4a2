// bench_peak — how far the MFU peak moves on a shared machine, per way of measuring it (issue 19).
//
//   [mpirun -n N] bench_peak [--rounds 10] [--dtype fp32|bf16]
//
// Each round measures, in turn on every rank at once (train::measure_cpu_peak_gflops: each rank's best,
// then the fastest rank's):
//   single    one size (1536^3), 3 timings: what `axonn train` measured before train/peak.hpp;
//   run       train::kRunPeakSizes × kRunPeakTrials: what `axonn train` measures now without a profile;
//   thorough  train::kThoroughPeakSizes × kThoroughPeakTrials: what `axonn calibrate` and the benchmarks take.
// A busy moment only lowers a rate, so the highest rate seen by any method in any round is the best
// estimate of the true peak. Per method the summary gives min / median / max over the rounds and
// "worst MFU inflation" = best seen / that method's min: the factor by which MFU would come out too high
// had the run measured its peak in that method's worst round (above 1/MFU, MFU would exceed 1).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/host.hpp"
#include "axonn/core/error.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/train/peak.hpp"

int main(int argc, char** argv) {
  using namespace axonn;
  comm::Runtime runtime(&argc, &argv);
  int rounds = 10;
  bool bf16 = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dtype")) bf16 = parse_precision(argv[i + 1]) == DType::kBF16;
    else {
      std::fprintf(stderr, "usage: bench_peak [--rounds R] [--dtype fp32|bf16]\n");
      return 2;
    }
  }
  if (rounds < 1) {
    std::fprintf(stderr, "--rounds must be >= 1\n");
    return 2;
  }
  auto world = comm::world();
  const bool root = world->rank() == 0;
  struct Method {
    const char* name;
    std::vector<int> sizes;
    int trials;
    std::vector<double> gflops;
  };
  std::vector<Method> methods = {{"single", {1536}, 3, {}},
                                 {"run", train::kRunPeakSizes, train::kRunPeakTrials, {}},
                                 {"thorough", train::kThoroughPeakSizes, train::kThoroughPeakTrials, {}}};
  if (root)
    std::printf("# bench_peak: %s GEMM (%s), %d rank(s) x %d thread(s) on %s, %d rounds, OPENBLAS_CORETYPE=%s\n",
                bf16 ? "bf16" : "fp32 (sgemm)", bf16 ? kernels::gemm_bf16_kernel().c_str() : "sgemm",
                world->size(), kernels::cpu_threads(), cpu_model().c_str(), rounds,
                std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(unset)");
  if (root) std::printf("%-6s %10s %10s %10s   GFLOP/s per rank\n", "round", "single", "run", "thorough");
  for (int r = 0; r < rounds; r++) {
    for (Method& m : methods) m.gflops.push_back(train::measure_cpu_peak_gflops(*world, bf16, m.sizes, m.trials));
    if (root)
      std::printf("%-6d %10.1f %10.1f %10.1f\n", r + 1, methods[0].gflops.back(), methods[1].gflops.back(),
                  methods[2].gflops.back());
  }
  double best = 0;
  for (const Method& m : methods) best = std::max(best, *std::max_element(m.gflops.begin(), m.gflops.end()));
  if (root) {
    std::printf("%-9s %8s %8s %8s %22s\n", "method", "min", "median", "max", "worst MFU inflation");
    for (Method& m : methods) {
      std::vector<double> v = m.gflops;
      std::sort(v.begin(), v.end());
      std::printf("%-9s %8.1f %8.1f %8.1f %22.3f\n", m.name, v.front(), v[v.size() / 2], v.back(), best / v.front());
    }
    std::printf("# best seen %.1f GFLOP/s per rank\n", best);
  }
  return 0;
}
