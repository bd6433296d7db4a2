// bench_crossentropy [rows] [rounds] — a training forward's softmax + cross-entropy tail on the CPU kernels, fp32
// and bf16, two ways interleaved round by round on the same logits (GPT-2's vocabulary, 50257 ids padded to
// 50304): the forward writing the probabilities over the logits, then the backward turning them into d logits in
// place (what a chunk ran before), against softmax_crossentropy_forward_backward, which does both in one pass and
// never stores the probabilities (what model/gpt.cpp runs now). The row max and sums come first, once, as in the
// model. Prints min and median ms of each and the ratio of medians. Both give the same bits (the kernel tests).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "axonn/kernels/ops_bf16.hpp"

using namespace axonn;
using kernels::bf16;

namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

template <class E>
void run(const kernels::OpTable<E>& k, const char* dtype, int64_t N, int rounds) {
  const int V = 50257, Vp = 50304;
  std::vector<E> logits(static_cast<size_t>(N * Vp)), work(logits.size());
  std::vector<int> targets(static_cast<size_t>(N));
  uint64_t state = 12345;
  for (auto& x : logits) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const float f = static_cast<float>(static_cast<int64_t>(state >> 40) % 2000 - 1000) * 4e-3f;
    if constexpr (std::is_same_v<E, float>)
      x = f;
    else
      x = f32_to_bf16(f);
  }
  for (int64_t n = 0; n < N; n++) targets[static_cast<size_t>(n)] = static_cast<int>((n * 7919) % V);
  std::vector<float> row_values(3 * static_cast<size_t>(N)), losses(static_cast<size_t>(N));
  float* maxv = row_values.data();
  float* sums = maxv + N;
  k.crossentropy_max(maxv, logits.data(), N, V, Vp);
  k.crossentropy_sums(sums, maxv, logits.data(), targets.data(), N, V, Vp, 0);
  const float dloss = 1.0f / static_cast<float>(N);
  std::vector<double> two_steps, one_pass;
  for (int r = 0; r < rounds; r++) {
    work = logits;
    const auto t0 = Clock::now();
    k.softmax_crossentropy_forward(losses.data(), work.data(), work.data(), maxv, sums, N, V, Vp);
    k.softmax_crossentropy_backward(work.data(), work.data(), targets.data(), nullptr, dloss, N, V, Vp, 0);
    const auto t1 = Clock::now();
    work = logits;
    const auto t2 = Clock::now();
    k.softmax_crossentropy_forward_backward(losses.data(), work.data(), work.data(), maxv, sums, targets.data(),
                                            nullptr, dloss, N, V, Vp, 0);
    const auto t3 = Clock::now();
    two_steps.push_back(ms(t0, t1));
    one_pass.push_back(ms(t2, t3));
  }
  std::sort(two_steps.begin(), two_steps.end());
  std::sort(one_pass.begin(), one_pass.end());
  const double med2 = two_steps[two_steps.size() / 2], med1 = one_pass[one_pass.size() / 2];
  const char* row = "%-6s %-40s %10.1f %10.1f\n";
  std::printf(row, dtype, "forward, then backward in place", two_steps.front(), med2);
  std::printf(row, dtype, "forward_backward (one pass)", one_pass.front(), med1);
  std::printf("%-6s ratio of medians (two steps / one pass): %.3f\n", dtype, med2 / med1);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 2048;  // GPT-2 124M's B=8, T=256
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 8;
  if (N <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: bench_crossentropy [rows > 0] [rounds > 0]\n");
    return 2;
  }
  std::printf("# kernels cpu, %lld rows x 50304 columns, %d rounds interleaved\n", static_cast<long long>(N), rounds);
  std::printf("%-6s %-40s %10s %10s\n", "dtype", "way", "min ms", "median ms");
  run(kernels::ops_for(kernels::Backend::kCpu), "fp32", N, rounds);
  run(kernels::ops_bf16_for(kernels::Backend::kCpu), "bf16", N, rounds);
  return 0;
}
