// bench_adamw [n_params] [rounds] — the mixed-precision optimizer step on the CPU kernels, two ways interleaved
// round by round on the same arrays: the fp32 table's AdamW followed by the cast pass that rounds the bf16
// copies (what a step did before the update wrote them), and the bf16 table's AdamW that writes the copies in
// its own pass (what train::train_step runs now). Prints min and median ms of each, their ratio, and the
// bandwidth each reaches (bytes moved: 28 per parameter for the update, + 6 for the cast pass; 30 fused).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "axonn/kernels/ops_bf16.hpp"

using namespace axonn;
using kernels::bf16;

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 124475904;  // GPT-2 124M
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 8;
  if (n <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: bench_adamw [n_params > 0] [rounds > 0]\n");
    return 2;
  }
  std::vector<float> master(static_cast<size_t>(n), 0.01f), m(static_cast<size_t>(n), 0.0f),
      v(static_cast<size_t>(n), 0.0f), grads(static_cast<size_t>(n), 1e-3f);
  std::vector<bf16> copies(static_cast<size_t>(n));
  const auto& fp32 = kernels::ops_for(kernels::Backend::kCpu);
  const auto& mixed = kernels::ops_bf16_for(kernels::Backend::kCpu);
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::vector<double> two_passes, fused;
  for (int r = 0; r < rounds; r++) {
    const int t = 2 * r + 1;
    const auto t0 = Clock::now();
    fp32.adamw_update(master.data(), nullptr, m.data(), v.data(), grads.data(), n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f,
                      1.0f, t);
    mixed.cast_from_f32(copies.data(), master.data(), n);
    const auto t1 = Clock::now();
    mixed.adamw_update(master.data(), copies.data(), m.data(), v.data(), grads.data(), n, 1e-4f, 0.9f, 0.95f, 1e-8f,
                       0.1f, 1.0f, t + 1);
    const auto t2 = Clock::now();
    two_passes.push_back(ms(t0, t1));
    fused.push_back(ms(t1, t2));
  }
  std::sort(two_passes.begin(), two_passes.end());
  std::sort(fused.begin(), fused.end());
  const double med2 = two_passes[two_passes.size() / 2], medf = fused[fused.size() / 2];
  const double gb = static_cast<double>(n) * 1e-9;
  std::printf("# kernels cpu, %lld parameters, %d rounds interleaved\n", static_cast<long long>(n), rounds);
  std::printf("%-28s %10s %10s %10s\n", "way", "min ms", "median ms", "GB/s");
  const char* row = "%-28s %10.1f %10.1f %10.1f\n";
  std::printf(row, "update, then cast pass", two_passes.front(), med2, 34 * gb / (med2 * 1e-3));
  std::printf(row, "update writing the copies", fused.front(), medf, 30 * gb / (medf * 1e-3));
  std::printf("ratio of medians (two passes / fused): %.3f\n", med2 / medf);
  return 0;
}
