// bench_flash_attention — times the bf16 flash attention (kernels::cuda_bf16_ops()) forward and backward on
// one GPU and prints TFLOP/s, with a check that the output is finite.
//
//   bench_flash_attention [B T NH HS] [iters]       (default GPT-2 124M: 16 1024 12 64, 20 iterations)
//
// FLOPs of causal attention (FlashAttention-2's convention): forward = 2 matmuls of 2*T*T*HS per head, halved
// by the mask: 2*B*NH*T*T*HS; backward = 2.5 x forward (recomputing the scores, dV, dP, dQ, dK).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/cuda.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/device_buffer.hpp"

namespace {

using axonn::cuda_detail::DeviceBuffer;

// Milliseconds of `iters` runs of f(), after 3 warm-up runs, between two events on the default stream.
template <typename F>
double time_ms(int iters, F&& f) {
  for (int i = 0; i < 3; i++) f();
  cudaEvent_t start, stop;
  AXONN_CUDA_CHECK(cudaEventCreate(&start));
  AXONN_CUDA_CHECK(cudaEventCreate(&stop));
  AXONN_CUDA_CHECK(cudaEventRecord(start, nullptr));
  for (int i = 0; i < iters; i++) f();
  AXONN_CUDA_CHECK(cudaEventRecord(stop, nullptr));
  AXONN_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  AXONN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  AXONN_CUDA_CHECK(cudaEventDestroy(start));
  AXONN_CUDA_CHECK(cudaEventDestroy(stop));
  return static_cast<double>(ms) / iters;
}

int run(int B, int T, int NH, int HS, int iters) {
  if (axonn::cuda_detail::device_count() == 0) {
    std::printf("bench_flash_attention: SKIPPED (no CUDA device)\n");
    return 3;
  }
  const int C = NH * HS;
  const size_t nqkv = static_cast<size_t>(B) * T * 3 * C, nout = static_cast<size_t>(B) * T * C,
               nlse = static_cast<size_t>(B) * NH * T;
  std::vector<uint16_t> host(nqkv);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& x : host) x = axonn::f32_to_bf16(dist(rng));
  DeviceBuffer qkv(nqkv * 2), dqkv(nqkv * 2), out(nout * 2), dout(nout * 2), lse(nlse * 4), scratch(nlse * 4);
  qkv.upload(host.data(), nqkv * 2);
  dout.upload(host.data(), nout * 2);  // any values will do
  dqkv.zero();
  using bf16 = axonn::kernels::bf16;
  const auto& ops = axonn::kernels::cuda_bf16_ops();
  auto fwd = [&] { ops.attention_forward(out.as<bf16>(), lse.as<float>(), qkv.as<bf16>(), B, T, C, NH); };
  auto bwd = [&] {
    ops.attention_backward(dqkv.as<bf16>(), scratch.as<float>(), dout.as<bf16>(), qkv.as<bf16>(), out.as<bf16>(),
                           lse.as<float>(), B, T, C, NH);
  };
  const double fwd_ms = time_ms(iters, fwd);
  const double bwd_ms = time_ms(iters, bwd);
  std::vector<float> l(nlse);
  lse.download(l.data(), nlse * 4);
  for (float x : l)
    if (!std::isfinite(x)) {
      std::printf("bench_flash_attention: FAIL (non-finite lse)\n");
      return 1;
    }
  const double fwd_flop = 2.0 * B * NH * static_cast<double>(T) * T * HS, bwd_flop = 2.5 * fwd_flop;
  cudaDeviceProp prop{};
  AXONN_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("flash attention bf16 (CUDA cores, fp32 math) on %s: B=%d T=%d NH=%d HS=%d, %d iterations\n",
              prop.name, B, T, NH, HS, iters);
  std::printf("  forward  %8.3f ms  %7.2f TFLOP/s\n", fwd_ms, fwd_flop / fwd_ms * 1e-9);
  std::printf("  backward %8.3f ms  %7.2f TFLOP/s\n", bwd_ms, bwd_flop / bwd_ms * 1e-9);
  std::printf("  fwd+bwd  %8.3f ms  %7.2f TFLOP/s (causal FLOPs, FlashAttention-2 convention)\n", fwd_ms + bwd_ms,
              (fwd_flop + bwd_flop) / (fwd_ms + bwd_ms) * 1e-9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int B = 16, T = 1024, NH = 12, HS = 64, iters = 20;
  if (argc >= 5) {
    B = std::atoi(argv[1]);
    T = std::atoi(argv[2]);
    NH = std::atoi(argv[3]);
    HS = std::atoi(argv[4]);
  }
  if (argc >= 6) iters = std::atoi(argv[5]);
  if (B <= 0 || T <= 0 || NH <= 0 || HS <= 0 || iters <= 0) {
    std::fprintf(stderr,
                 "usage: bench_flash_attention [B T NH HS] [iters]  (all positive; HS a multiple of 8 <= 128)\n");
    return 2;
  }
  try {
    return run(B, T, NH, HS, iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_flash_attention: %s\n", e.what());
    return 1;
  }
}
