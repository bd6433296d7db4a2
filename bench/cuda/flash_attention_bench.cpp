// bench_flash_attention — times the bf16 flash attentions (kernels::cuda_bf16_ops(FlashAttention)) forward and
// backward on one GPU: the two tensor-core ones (head sizes 64 and 128: WMMA, and mma.sync on register-resident
// fragments) and the CUDA-core one, TFLOP/s each, marks which one cuda_bf16_ops() runs by default, checks that
// lse is finite, and prints how far each tensor-core implementation's outputs are from the CUDA cores' (the
// tests bound that on small shapes; this is the full-size look).
//
//   bench_flash_attention [B T NH HS] [iters]       (default GPT-2 124M: 16 1024 12 64, 20 iterations)
//
// FLOPs of causal attention (FlashAttention-2's convention): forward = 2 matmuls of 2*T*T*HS per head, halved
// by the mask: 2*B*NH*T*T*HS; backward = 2.5 x forward (recomputing the scores, dV, dP, dQ, dK). Times are
// CUDA events on the kernels' compute stream (kernels::cuda_compute_stream()).
#include <cuda_runtime.h>

#include <algorithm>
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
#include "cuda_timing.hpp"

namespace {

using axonn::cuda_detail::DeviceBuffer;
using axonn::kernels::bf16;
using axonn::kernels::FlashAttention;

std::vector<float> host_floats(const DeviceBuffer& b, size_t n, bool is_bf16) {
  std::vector<float> v(n);
  if (is_bf16) {
    std::vector<uint16_t> h(n);
    b.download(h.data(), n * 2);
    for (size_t i = 0; i < n; i++) v[i] = axonn::bf16_to_f32(h[i]);
  } else {
    b.download(v.data(), n * 4);
  }
  return v;
}

// max |a - b| and max |b|; NaN if any value is not finite.
void compare(const char* name, const char* what, const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < a.size(); i++) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
      diff = NAN;
      break;
    }
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
  }
  std::printf("  %s vs CUDA cores: %-5s max |difference| %.3g (max |value| %.3g)\n", name, what, diff, mag);
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
  const double fwd_flop = 2.0 * B * NH * static_cast<double>(T) * T * HS, bwd_flop = 2.5 * fwd_flop;
  cudaDeviceProp prop{};
  int device = 0;
  AXONN_CUDA_CHECK(cudaGetDevice(&device));
  AXONN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const FlashAttention chosen = axonn::kernels::cuda_flash_attention_for(HS);
  std::printf("flash attention bf16 on %s: B=%d T=%d NH=%d HS=%d, %d iterations (causal FLOPs, FlashAttention-2 "
              "convention)\n",
              prop.name, B, T, NH, HS, iters);

  // Each implementation: timed forward and backward; then its out and dqkv (from zero) for the comparison.
  struct Result {
    const char* name;
    std::vector<float> out, dqkv;
  };
  std::vector<Result> results;
  // The register-resident kernels last: they have never run on a GPU, and a fault there ends the CUDA context,
  // so the others' figures are printed first.
  for (FlashAttention impl :
       {FlashAttention::kCudaCores, FlashAttention::kTensorCores, FlashAttention::kTensorCoresMma}) {
    const char* label = impl == FlashAttention::kTensorCores      ? "tensor cores"
                        : impl == FlashAttention::kTensorCoresMma ? "tensor cores mma"
                                                                  : "CUDA cores";
    if (impl != FlashAttention::kCudaCores && HS != 64 && HS != 128) {
      std::printf("  %s: no kernel for head size %d (64 or 128)\n", label, HS);
      continue;
    }
    const auto& ops = axonn::kernels::cuda_bf16_ops(impl);
    auto fwd = [&] { ops.attention_forward(out.as<bf16>(), lse.as<float>(), qkv.as<bf16>(), B, T, C, NH); };
    auto bwd = [&] {
      ops.attention_backward(dqkv.as<bf16>(), scratch.as<float>(), dout.as<bf16>(), qkv.as<bf16>(), out.as<bf16>(),
                             lse.as<float>(), B, T, C, NH);
    };
    dqkv.zero();
    const double fwd_ms = axonn::bench::cuda_time_ms(iters, fwd);
    const double bwd_ms = axonn::bench::cuda_time_ms(iters, bwd);
    for (float x : host_floats(lse, nlse, false))
      if (!std::isfinite(x)) {
        std::printf("bench_flash_attention: FAIL (non-finite lse)\n");
        return 1;
      }
    char name[64];
    std::snprintf(name, sizeof name, "%s%s", label, impl == chosen ? " (default)" : "");
    std::printf("  %-23s forward  %8.3f ms  %7.2f TFLOP/s\n", name, fwd_ms, fwd_flop / fwd_ms * 1e-9);
    std::printf("  %-23s backward %8.3f ms  %7.2f TFLOP/s\n", name, bwd_ms, bwd_flop / bwd_ms * 1e-9);
    std::printf("  %-23s fwd+bwd  %8.3f ms  %7.2f TFLOP/s\n", name, fwd_ms + bwd_ms,
                (fwd_flop + bwd_flop) / (fwd_ms + bwd_ms) * 1e-9);
    fwd();
    dqkv.zero();
    bwd();
    results.push_back({label, host_floats(out, nout, true), host_floats(dqkv, nqkv, true)});
  }
  const Result& cuda_cores = results.front();  // the CUDA cores take every head size
  for (size_t i = 1; i < results.size(); i++) {
    compare(results[i].name, "out", results[i].out, cuda_cores.out);
    compare(results[i].name, "dqkv", results[i].dqkv, cuda_cores.dqkv);
  }
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
