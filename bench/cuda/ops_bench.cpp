// bench_cuda_ops — the memory-bound ops of the CUDA tables (kernels/cuda.hpp: norms, GELU, SwiGLU, RoPE, residuals,
// the linear layers' bias and bias gradient, the cross-entropy's steps and one pass, AdamW) timed one table entry at a time at
// a training step's shape, each against its floor: the bytes it cannot avoid moving (every input read once, every
// output written once; an output it adds to is read and written) at the device's copy bandwidth, measured in the
// same run (a device-to-device cudaMemcpyAsync of 1 GiB). "x floor" says how far an op is from what memory allows; the GEMMs and the flash
// attention have their own benchmarks (bench_gpt2_step, bench_flash_attention).
//
//   bench_cuda_ops [--dtype bf16|fp32] [--rows N] [--channels C] [--vocab V] [--params P] [--iters I]
//
// Defaults: GPT-2 124M at B=16, T=1024 (N = 16384 rows, C = 768, V = 50257 padded to a multiple of 128,
// P = 124,439,808 parameters), bf16, 20 iterations; the MLP's width is 4C (GELU's input; SwiGLU's
// gate | up is [N, 2 * 4C]; RoPE turns the q heads, of size 64, of q|k|v rows of 3C at T = 1024). Times are CUDA events (bench/cuda/cuda_timing.hpp). The last line, "summary:",
// names the ops 3x or more above their floor, slowest first (scripts/device-check.sh prints it).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/cuda.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/device_buffer.hpp"
#include "cuda_timing.hpp"

namespace {

using axonn::cuda_detail::DeviceBuffer;
using axonn::kernels::bf16;

struct Options {
  std::string dtype = "bf16";
  int64_t rows = 16 * 1024;
  int channels = 768;
  int vocab = 50257;
  int64_t params = 124439808;
  int iters = 20;
};

// `count` elements of E on the device from a normal distribution (mean 0, deviation `scale`): a 1 Mi-element
// host tile, uploaded over and over (a 1.6 GB tensor of independent values would take seconds on the host).
template <typename E>
DeviceBuffer random_device(size_t count, float scale, unsigned seed) {
  DeviceBuffer d(count * sizeof(E));
  const size_t tile = std::min<size_t>(count, size_t{1} << 20);
  std::vector<E> host(tile);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (auto& x : host) {
    if constexpr (sizeof(E) == 2)
      x = axonn::f32_to_bf16(dist(rng));
    else
      x = dist(rng);
  }
  for (size_t at = 0; at < count; at += tile)
    d.upload(host.data(), std::min(tile, count - at) * sizeof(E), at * sizeof(E));
  return d;
}

// Device-to-device copy bandwidth, bytes per second (read + written), of a 1 GiB copy on the compute stream.
double copy_bandwidth(int iters) {
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer a(bytes), b(bytes);
  a.zero();
  auto* stream = static_cast<cudaStream_t>(axonn::kernels::cuda_compute_stream());
  const double ms = axonn::bench::cuda_time_ms(
      iters, [&] { AXONN_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream)); });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
}

struct Timed {
  std::string op;
  double ms, bytes;
};

template <typename E>
const axonn::kernels::OpTable<E>& table() {
  if constexpr (sizeof(E) == 2)
    return axonn::kernels::cuda_bf16_ops();
  else
    return axonn::kernels::cuda_ops();
}

template <typename E>
int run(const Options& o) {
  const auto& k = table<E>();
  const int64_t N = o.rows, P = o.params;
  const int C = o.channels, V = o.vocab, Vp = (o.vocab + 127) / 128 * 128, F = 4 * o.channels;
  const double s = sizeof(E), NC = static_cast<double>(N) * C, NF = static_cast<double>(N) * F,
               NV = static_cast<double>(N) * Vp;
  const double bandwidth = copy_bandwidth(o.iters);

  DeviceBuffer x = random_device<E>(N * C, 1.0f, 1), dy = random_device<E>(N * C, 1.0f, 2),
               dx = random_device<E>(N * C, 1.0f, 3), out(N * C * sizeof(E));
  DeviceBuffer w = random_device<E>(C, 1.0f, 4), b = random_device<E>(C, 1.0f, 5);
  DeviceBuffer mean(N * 4), rstd(N * 4), sums(2 * N * 4), dw(C * 4), db(C * 4);
  DeviceBuffer fb = random_device<E>(F, 1.0f, 13), dfb(F * 4);  // an MLP bias and its gradient
  DeviceBuffer h = random_device<E>(N * 2 * F, 1.0f, 6), hout = random_device<E>(N * 2 * F, 1.0f, 7),
               dh = random_device<E>(N * 2 * F, 1.0f, 8);
  DeviceBuffer logits = random_device<E>(N * Vp, 2.0f, 9), maxv(N * 4), ce_sums(2 * N * 4), losses(N * 4);
  std::vector<int> targets(N);
  std::mt19937 rng(10);
  for (auto& t : targets) t = static_cast<int>(rng() % static_cast<unsigned>(V));
  DeviceBuffer d_targets(N * sizeof(int));
  d_targets.upload(targets.data(), N * sizeof(int));
  DeviceBuffer master = random_device<float>(P, 0.02f, 11), grads = random_device<float>(P, 1e-3f, 12), m(P * 4),
               v(P * 4), copy(sizeof(E) == 2 ? P * 2 : 0);
  m.zero();
  v.zero();
  for (DeviceBuffer* f : {&mean, &rstd, &sums, &dw, &db, &dfb}) f->zero();
  // RoPE on the q heads (head size 64) of q|k|v rows of 3C (in h's memory), positions of sequences of T
  const int rope_hs = 64, rope_heads = C / rope_hs, rope_half = rope_hs / 2;
  const int rope_t = N % 1024 == 0 ? 1024 : static_cast<int>(N), rope_b = static_cast<int>(N / rope_t);
  DeviceBuffer rope_cos = random_device<float>(static_cast<int64_t>(rope_t) * rope_half, 1.0f, 14),
               rope_sin = random_device<float>(static_cast<int64_t>(rope_t) * rope_half, 1.0f, 15);

  E* const X = x.as<E>();
  E* const DY = dy.as<E>();
  E* const DX = dx.as<E>();
  E* const OUT = out.as<E>();
  E* const W = w.as<E>();
  E* const B = b.as<E>();
  E* const H = h.as<E>();
  E* const HOUT = hout.as<E>();
  E* const DH = dh.as<E>();
  E* const LOGITS = logits.as<E>();
  float *const MEAN = mean.as<float>(), *const RSTD = rstd.as<float>(), *const SUMS = sums.as<float>();
  float *const DW = dw.as<float>(), *const DB = db.as<float>(), *const DFB = dfb.as<float>();
  E* const FB = fb.as<E>();
  float *const MAXV = maxv.as<float>(), *const CE = ce_sums.as<float>(), *const LOSSES = losses.as<float>();
  const int* const TARGETS = d_targets.as<int>();
  E* const COPY = sizeof(E) == 2 ? copy.as<E>() : nullptr;

  // In a step's order, so that each op reads the values the one before it wrote (the statistics, the max).
  const std::vector<std::pair<Timed, std::function<void()>>> ops = {
      {{"layernorm_sum", 0, NC * s}, [&] { k.layernorm_sum(MEAN, X, N, C); }},
      {{"layernorm_centred_sumsq", 0, NC * s}, [&] { k.layernorm_centred_sumsq(RSTD, MEAN, X, N, C, C); }},
      {{"layernorm_forward", 0, 2 * NC * s}, [&] { k.layernorm_forward(OUT, MEAN, RSTD, X, W, B, N, C, C); }},
      {{"layernorm_backward_sums", 0, 2 * NC * s},
       [&] { k.layernorm_backward_sums(SUMS, DY, X, W, MEAN, RSTD, N, C); }},
      {{"layernorm_backward", 0, 4 * NC * s},
       [&] { k.layernorm_backward(DX, DW, DB, DY, X, W, MEAN, RSTD, SUMS, N, C, C); }},
      {{"rmsnorm_sumsq", 0, NC * s}, [&] { k.rmsnorm_sumsq(RSTD, X, N, C); }},
      {{"rmsnorm_forward", 0, 2 * NC * s}, [&] { k.rmsnorm_forward(OUT, RSTD, X, W, N, C, C, 1e-5f); }},
      {{"rmsnorm_backward_dot", 0, 2 * NC * s}, [&] { k.rmsnorm_backward_dot(SUMS, DY, X, W, N, C); }},
      {{"rmsnorm_backward", 0, 4 * NC * s}, [&] { k.rmsnorm_backward(DX, DW, DY, X, W, RSTD, SUMS, N, C, C); }},
      {{"gelu_forward", 0, 2 * NF * s}, [&] { k.gelu_forward(HOUT, H, N * F); }},
      {{"gelu_backward", 0, 4 * NF * s}, [&] { k.gelu_backward(DH, H, HOUT, N * F); }},
      {{"rope_forward", 0, 2 * static_cast<double>(N) * rope_heads * rope_hs * s},
       [&] {
         k.rope_forward(H, rope_cos.as<float>(), rope_sin.as<float>(), rope_b, rope_t, rope_heads, rope_hs, 3 * C);
       }},
      {{"swiglu_forward", 0, 3 * NF * s}, [&] { k.swiglu_forward(HOUT, H, N, F); }},
      {{"swiglu_backward", 0, 7 * NF * s}, [&] { k.swiglu_backward(DH, H, HOUT, N, F); }},
      // the linear layers' bias over the MLP's N x F output: broadcast into the output, which the GEMM then adds
      // to (matmul_forward over an empty sum, C = 0, runs the broadcast alone), and its gradient (matmul_backward
      // for dbias alone: the sums down the rows)
      {{"bias_broadcast", 0, NF * s}, [&] { k.matmul_forward(HOUT, H, H, FB, N, 0, F); }},
      {{"bias_gradient", 0, NF * s}, [&] { k.matmul_backward(nullptr, nullptr, DFB, DH, H, H, N, C, F); }},
      {{"residual_forward", 0, 3 * NC * s}, [&] { k.residual_forward(OUT, X, DY, N * C); }},
      {{"residual_backward", 0, 5 * NC * s}, [&] { k.residual_backward(DX, OUT, DY, N * C); }},
      {{"crossentropy_max", 0, NV * s}, [&] { k.crossentropy_max(MAXV, LOGITS, N, V, Vp); }},
      {{"crossentropy_sums", 0, NV * s}, [&] { k.crossentropy_sums(CE, MAXV, LOGITS, TARGETS, N, V, Vp, 0); }},
      // probs in place of the logits, then dlogits in place of the probs, as the model runs them
      {{"softmax_crossentropy_forward", 0, 2 * NV * s},
       [&] { k.softmax_crossentropy_forward(LOSSES, LOGITS, LOGITS, MAXV, CE, N, V, Vp); }},
      {{"softmax_crossentropy_backward", 0, 2 * NV * s},
       [&] {
         k.softmax_crossentropy_backward(LOGITS, LOGITS, TARGETS, nullptr, 1.0f / static_cast<float>(N), N, V, Vp, 0);
       }},
      // a training forward's: the losses and dlogits in place of the logits in one pass (the probabilities never
      // stored), where the two ops above move the row twice each
      {{"softmax_crossentropy_forward_backward", 0, 2 * NV * s},
       [&] {
         k.softmax_crossentropy_forward_backward(LOSSES, LOGITS, LOGITS, MAXV, CE, TARGETS, nullptr,
                                                 1.0f / static_cast<float>(N), N, V, Vp, 0);
       }},
      // master, m, v read and written, grads read, the copy written
      {{"adamw_update", 0, static_cast<double>(P) * (7 * 4 + (sizeof(E) == 2 ? 2 : 0))},
       [&] { k.adamw_update(master.as<float>(), COPY, m.as<float>(), v.as<float>(), grads.as<float>(), P, 3e-4f, 0.9f,
                            0.95f, 1e-8f, 0.1f, 1.0f, 1); }},
  };

  std::printf("memory-bound ops, %s, on %s: N=%lld rows, C=%d, MLP %d, V=%d (padded %d), %lld parameters, "
              "%d iterations\n",
              o.dtype.c_str(), axonn::kernels::cuda_device_name().c_str(), static_cast<long long>(N), C, F, V, Vp,
              static_cast<long long>(P), o.iters);
  std::printf("device copy bandwidth (device to device, 1 GiB): %.0f GB/s\n", bandwidth * 1e-9);
  std::printf("%-38s %10s %10s %10s %8s\n", "op", "ms", "GB/s", "floor ms", "x floor");
  std::vector<Timed> timed;
  for (const auto& [t, f] : ops) {
    Timed r = t;
    r.ms = axonn::bench::cuda_time_ms(o.iters, f);
    const double floor_ms = r.bytes / bandwidth * 1e3;
    std::printf("%-38s %10.3f %10.0f %10.3f %8.1f\n", r.op.c_str(), r.ms, r.bytes / (r.ms * 1e-3) * 1e-9, floor_ms,
                r.ms / floor_ms);
    timed.push_back(r);
  }
  std::sort(timed.begin(), timed.end(), [](const Timed& p, const Timed& q) { return p.ms / p.bytes > q.ms / q.bytes; });
  std::string summary;
  for (const Timed& r : timed) {
    const double ratio = r.ms / (r.bytes / bandwidth * 1e3);
    if (ratio < 3.0) break;
    char part[128];
    std::snprintf(part, sizeof part, "%s%s %.3f ms (x%.1f)", summary.empty() ? "" : ", ", r.op.c_str(), r.ms, ratio);
    summary += part;
  }
  std::printf("summary: copy %.0f GB/s; %s\n", bandwidth * 1e-9,
              summary.empty() ? "every op within 3x of its floor" : ("over 3x their floor: " + summary).c_str());
  return 0;
}

bool parse_int(const char* text, int64_t lo, int64_t hi, int64_t* out) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  const char* usage =
      "usage: bench_cuda_ops [--dtype bf16|fp32] [--rows N] [--channels C] [--vocab V] [--params P] [--iters I]\n";
  for (int i = 1; i < argc; i++) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "bench_cuda_ops: %s needs a value\n%s", flag.c_str(), usage);
      return 2;
    }
    const char* value = argv[++i];
    int64_t n = 0;
    bool ok = true;
    if (flag == "--dtype") {
      o.dtype = value;
      ok = o.dtype == "bf16" || o.dtype == "fp32";
    } else if (flag == "--rows") {
      ok = parse_int(value, 1, int64_t{1} << 24, &n);
      o.rows = n;
    } else if (flag == "--channels") {
      ok = parse_int(value, 1, 1 << 16, &n);
      o.channels = static_cast<int>(n);
    } else if (flag == "--vocab") {
      ok = parse_int(value, 1, 1 << 20, &n);
      o.vocab = static_cast<int>(n);
    } else if (flag == "--params") {
      ok = parse_int(value, 1, int64_t{1} << 32, &n);
      o.params = n;
    } else if (flag == "--iters") {
      ok = parse_int(value, 1, 100000, &n);
      o.iters = static_cast<int>(n);
    } else {
      std::fprintf(stderr, "bench_cuda_ops: unknown flag %s\n%s", flag.c_str(), usage);
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "bench_cuda_ops: bad value '%s' for %s\n%s", value, flag.c_str(), usage);
      return 2;
    }
  }
  if (axonn::cuda_detail::device_count() == 0) {
    std::printf("bench_cuda_ops: SKIPPED (no CUDA device)\n");
    return 3;
  }
  try {
    return o.dtype == "bf16" ? run<bf16>(o) : run<float>(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_ops: %s\n", e.what());
    return 1;
  }
}
