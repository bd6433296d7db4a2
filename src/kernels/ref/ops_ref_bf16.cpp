// kernels/ref/ops_ref_bf16.cpp — the bf16 op list on the CPU: `ref_bf16` (the oracle for the GPU's bf16
// kernels) and `cpu_bf16` (mixed-precision training on the CPU; its matmuls and embedding lookup run on
// bf16 directly in cpu/ops_cpu_bf16.cpp, its blocks' memory-bound ops, AdamW and casts in cpu/, one file per op family).
//
// Every other op (all of ref_bf16's) widens its bf16 inputs to fp32 (exact), runs the fp32 op of
// `kernels::ref` or `kernels::cpu` (fp32 accumulation), and rounds each bf16 output once
// (round-to-nearest-even, core/dtype.hpp). An output that is accumulated into (dinp += ...) is widened
// first, so the old value and the new terms are summed in fp32 and the sum is rounded once. fp32 outputs
// (parameter gradients, statistics, losses) are passed to the fp32 op directly.
// Attention keeps lse[B,NH,T] instead of att[B,NH,T,T]; ref_bf16's backward rebuilds att from qkv and lse by
// direct sums (cpu_bf16's attention is flash-style, in cpu/attention.cpp).
// Plain and obviously right: temporary fp32 copies of everything (ref_bf16 is also slow).
#include <cmath>
#include <cstring>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels {
namespace {

using Vec = std::vector<float>;

// Elementwise conversions, threaded when large (each element on its own: the same bits for any thread count).
constexpr int64_t kThreadedConversion = int64_t{1} << 16;

Vec widen(const bf16* x, int64_t n) {
  Vec v(static_cast<size_t>(n));
#pragma omp parallel for schedule(static) if (n >= kThreadedConversion)
  for (int64_t i = 0; i < n; i++) v[static_cast<size_t>(i)] = bf16_to_f32(x[i]);
  return v;
}

void round_into(bf16* out, const Vec& v) {
  const auto n = static_cast<int64_t>(v.size());
#pragma omp parallel for schedule(static) if (n >= kThreadedConversion)
  for (int64_t i = 0; i < n; i++) out[i] = f32_to_bf16(v[static_cast<size_t>(i)]);
}

// lse[b,h,t] = log sum_{t2<=t} exp(s) with s = q_t . k_t2 / sqrt(HS), as max + log(sum exp(s - max)).
void attention_lse(float* lse, const float* qkv, int B, int T, int C, int NH) {
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt((float)HS);
  // rows are independent: threads change nothing in the result
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      Vec s(static_cast<size_t>(T));
      for (int t = 0; t < T; t++) {
        const float* q = qkv + ((int64_t)b * T + t) * 3 * C + h * HS;
        float maxv = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
          const float* k = qkv + ((int64_t)b * T + t2) * 3 * C + C + h * HS;
          float dot = 0.0f;
          for (int i = 0; i < HS; i++) dot += q[i] * k[i];
          s[static_cast<size_t>(t2)] = dot * scale;
          maxv = std::fmax(maxv, s[static_cast<size_t>(t2)]);
        }
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) sum += std::exp(s[static_cast<size_t>(t2)] - maxv);
        lse[((int64_t)b * NH + h) * T + t] = maxv + std::log(sum);
      }
    }
}

// The flash backward's D term, rowsum(dout * out) per (b, h, t), into d [B,NH,T] (the contract's scratch).
void attention_d(float* d, const float* dout, const float* out, int B, int T, int C, int NH) {
  const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const float* o = out + ((int64_t)b * T + t) * C + h * HS;
        const float* g = dout + ((int64_t)b * T + t) * C + h * HS;
        float D = 0.0f;
        for (int i = 0; i < HS; i++) D += g[i] * o[i];
        d[((int64_t)b * NH + h) * T + t] = D;
      }
}

// The op list over the fp32 kernels of backend kFp32 (ref or cpu): widen, run, round once.
template <Backend kFp32>
struct Widened {
  static const Ops& fp32() { return ops_for(kFp32); }

  static void embedding_forward(bf16* out, const int* inp, const bf16* wte, int row_begin, int R, int64_t N, int C) {
    // out [N,C], inp [N], wte [R,C]
    Vec w = widen(wte, (int64_t)R * C), o(static_cast<size_t>(N * C));
    fp32().embedding_forward(o.data(), inp, w.data(), row_begin, R, N, C);
    round_into(out, o);
  }

  static void embedding_backward(float* dwte, const bf16* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
    // dwte [R,C] fp32 (added to), dout [N,C], inp [N]
    Vec d = widen(dout, N * C);
    fp32().embedding_backward(dwte, d.data(), inp, row_begin, R, N, C);
  }

  static void position_forward(bf16* out, const bf16* wpe, int B, int T, int C) {
    // out [B,T,C] (added to), wpe [maxT,C] (the first T rows are read)
    Vec o = widen(out, (int64_t)B * T * C), w = widen(wpe, (int64_t)T * C);
    fp32().position_forward(o.data(), w.data(), B, T, C);
    round_into(out, o);
  }

  static void position_backward(float* dwpe, const bf16* dout, int B, int T, int C) {
    // dwpe [maxT,C] fp32 (added to), dout [B,T,C]
    Vec d = widen(dout, (int64_t)B * T * C);
    fp32().position_backward(dwpe, d.data(), B, T, C);
  }

  static void layernorm_sum(float* mean, const bf16* inp, int64_t N, int C) {
    Vec x = widen(inp, N * C);
    fp32().layernorm_sum(mean, x.data(), N, C);
  }

  static void layernorm_centred_sumsq(float* var, float* mean, const bf16* inp, int64_t N, int C, int C_total) {
    Vec x = widen(inp, N * C);
    fp32().layernorm_centred_sumsq(var, mean, x.data(), N, C, C_total);
  }

  static void layernorm_forward(bf16* out, const float* mean, float* rstd, const bf16* inp, const bf16* weight,
                                const bf16* bias, int64_t N, int C, int C_total) {
    // out [N,C], mean [N], rstd [N] fp32, inp [N,C], weight [C], bias [C]
    Vec x = widen(inp, N * C), w = widen(weight, C), b = widen(bias, C), o(static_cast<size_t>(N * C));
    fp32().layernorm_forward(o.data(), mean, rstd, x.data(), w.data(), b.data(), N, C, C_total);
    round_into(out, o);
  }

  static void layernorm_backward_sums(float* sums, const bf16* dout, const bf16* inp, const bf16* weight,
                                      const float* mean, const float* rstd, int64_t N, int C) {
    Vec dy = widen(dout, N * C), x = widen(inp, N * C), w = widen(weight, C);
    fp32().layernorm_backward_sums(sums, dy.data(), x.data(), w.data(), mean, rstd, N, C);
  }

  static void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                                 const bf16* weight, const float* mean, const float* rstd, const float* sums, int64_t N,
                                 int C, int C_total) {
    // dinp [N,C] (added to), dweight [C], dbias [C] fp32 (added to), dout [N,C], inp [N,C], weight [C]
    Vec dx = widen(dinp, N * C), dy = widen(dout, N * C), x = widen(inp, N * C), w = widen(weight, C);
    fp32().layernorm_backward(dx.data(), dweight, dbias, dy.data(), x.data(), w.data(), mean, rstd, sums, N, C,
                              C_total);
    round_into(dinp, dx);
  }

  static void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int64_t N, int C, int OC) {
    // out [N,OC], inp [N,C], weight [OC,C], bias [OC] or null
    Vec x = widen(inp, N * C), w = widen(weight, (int64_t)OC * C), o(static_cast<size_t>(N * OC));
    Vec b = bias ? widen(bias, OC) : Vec();
    fp32().matmul_forward(o.data(), x.data(), w.data(), bias ? b.data() : nullptr, N, C, OC);
    round_into(out, o);
  }

  static void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                       const bf16* weight, int64_t N, int C, int OC) {
    // dinp [N,C] bf16 (added to) or null, dweight [OC,C], dbias [OC] fp32 (added to) or null
    Vec dy = widen(dout, N * OC), x = widen(inp, N * C), w = widen(weight, (int64_t)OC * C);
    Vec dx = dinp ? widen(dinp, N * C) : Vec();
    fp32().matmul_backward(dinp ? dx.data() : nullptr, dweight, dbias, dy.data(), x.data(), w.data(), N, C, OC);
    if (dinp) round_into(dinp, dx);
  }

  static void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
    // out [B,T,C], lse [B,NH,T] fp32, qkv [B,T,3C]
    Vec x = widen(qkv, (int64_t)B * T * 3 * C), o((size_t)B * T * C), att((size_t)B * NH * T * T);
    fp32().attention_forward(o.data(), att.data(), x.data(), B, T, C, NH);
    attention_lse(lse, x.data(), B, T, C, NH);  // the oracle: the sum itself
    round_into(out, o);
  }

  static void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                          const float* lse, int B, int T, int C, int NH) {
    // dqkv [B,T,3C] (added to), scratch [B,NH,T] fp32 (overwritten: D = rowsum(dout * out) per head),
    // dout [B,T,C], qkv [B,T,3C], out [B,T,C] and lse [B,NH,T] from the forward
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt((float)HS);
    Vec x = widen(qkv, (int64_t)B * T * 3 * C), dy = widen(dout, (int64_t)B * T * C);
    Vec dx = widen(dqkv, (int64_t)B * T * 3 * C), y = widen(out, (int64_t)B * T * C);
    Vec att((size_t)B * NH * T * T, 0.0f), datt((size_t)B * NH * T * T);
    // The oracle: the probabilities rebuilt from the scores and the forward's log-sum-exp, p = exp(s - lse).
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
          const int64_t row = ((int64_t)b * NH + h) * T + t;
          const float* q = x.data() + ((int64_t)b * T + t) * 3 * C + h * HS;
          for (int t2 = 0; t2 <= t; t2++) {
            const float* k = x.data() + ((int64_t)b * T + t2) * 3 * C + C + h * HS;
            float dot = 0.0f;
            for (int i = 0; i < HS; i++) dot += q[i] * k[i];
            att[static_cast<size_t>(row * T + t2)] = std::exp(dot * scale - lse[row]);
          }
        }
    // The flash backward's D term (sum_t2 p * dp = dout . out), kept in scratch as the contract says.
    attention_d(scratch, dy.data(), y.data(), B, T, C, NH);
    fp32().attention_backward(dx.data(), datt.data(), dy.data(), x.data(), nullptr, att.data(), B, T, C, NH);
    round_into(dqkv, dx);
  }

  static void gelu_forward(bf16* out, const bf16* inp, int64_t N) {
    Vec x = widen(inp, N), o(static_cast<size_t>(N));
    fp32().gelu_forward(o.data(), x.data(), N);
    round_into(out, o);
  }

  static void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N) {
    Vec dx = widen(dinp, N), x = widen(inp, N), dy = widen(dout, N);
    fp32().gelu_backward(dx.data(), x.data(), dy.data(), N);
    round_into(dinp, dx);
  }

  static void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t N) {
    Vec va = widen(a, N), vb = widen(b, N), o(static_cast<size_t>(N));
    fp32().residual_forward(o.data(), va.data(), vb.data(), N);
    round_into(out, o);
  }

  static void residual_backward(bf16* da, bf16* db, const bf16* dout, int64_t N) {
    Vec va = widen(da, N), vb = widen(db, N), dy = widen(dout, N);
    fp32().residual_backward(va.data(), vb.data(), dy.data(), N);
    round_into(da, va);
    round_into(db, vb);
  }

  static void crossentropy_max(float* maxv, const bf16* logits, int64_t N, int Vvalid, int Vs) {
    Vec z = widen(logits, N * Vs);
    fp32().crossentropy_max(maxv, z.data(), N, Vvalid, Vs);
  }

  static void crossentropy_sums(float* sums, const float* maxv, const bf16* logits, const int* targets, int64_t N,
                                int Vvalid, int Vs, int vocab_begin) {
    Vec z = widen(logits, N * Vs);
    fp32().crossentropy_sums(sums, maxv, z.data(), targets, N, Vvalid, Vs, vocab_begin);
  }

  static void softmax_crossentropy_forward(float* losses, bf16* probs, const bf16* logits, const float* maxv,
                                           const float* sums, int64_t N, int Vvalid, int Vs) {
    // losses [N] fp32, probs [N,Vs] (may alias logits: the logits are copied first), logits [N,Vs]
    Vec z = widen(logits, N * Vs), p(static_cast<size_t>(N * Vs));
    fp32().softmax_crossentropy_forward(losses, p.data(), z.data(), maxv, sums, N, Vvalid, Vs);
    round_into(probs, p);
  }

  static void softmax_crossentropy_backward(bf16* dlogits, const bf16* probs, const int* targets, const float* weights,
                                            float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
    // dlogits [N,Vs] (added to; overwritten when it aliases probs, as ref), probs [N,Vs], targets [N]
    Vec dz = widen(dlogits, N * Vs);
    if (static_cast<const bf16*>(dlogits) == probs) {
      fp32().softmax_crossentropy_backward(dz.data(), dz.data(), targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
    } else {
      Vec p = widen(probs, N * Vs);
      fp32().softmax_crossentropy_backward(dz.data(), p.data(), targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
    }
    round_into(dlogits, dz);
  }

  // --- the Llama block's ops ---
  static void rmsnorm_sumsq(float* sumsq, const bf16* inp, int64_t N, int C) {
    Vec x = widen(inp, N * C);
    fp32().rmsnorm_sumsq(sumsq, x.data(), N, C);
  }

  static void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int64_t N, int C,
                              int C_total, float eps) {
    Vec x = widen(inp, N * C), w = widen(weight, C), o(static_cast<size_t>(N * C));
    fp32().rmsnorm_forward(o.data(), rstd, x.data(), w.data(), N, C, C_total, eps);
    round_into(out, o);
  }

  static void rmsnorm_backward_dot(float* dot, const bf16* dout, const bf16* inp, const bf16* weight, int64_t N,
                                   int C) {
    Vec dy = widen(dout, N * C), x = widen(inp, N * C), w = widen(weight, C);
    fp32().rmsnorm_backward_dot(dot, dy.data(), x.data(), w.data(), N, C);
  }

  static void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                               const float* rstd, const float* dot, int64_t N, int C, int C_total) {
    Vec dx = widen(dinp, N * C), dy = widen(dout, N * C), x = widen(inp, N * C), w = widen(weight, C);
    fp32().rmsnorm_backward(dx.data(), dweight, dy.data(), x.data(), w.data(), rstd, dot, N, C, C_total);
    round_into(dinp, dx);
  }

  static void rope_forward(bf16* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
    Vec v = widen(x, (int64_t)B * T * stride);
    fp32().rope_forward(v.data(), cos, sin, B, T, heads, HS, stride);
    round_into(x, v);
  }

  static void rope_backward(bf16* dx, const float* cos, const float* sin, int B, int T, int heads, int HS,
                            int stride) {
    Vec v = widen(dx, (int64_t)B * T * stride);
    fp32().rope_backward(v.data(), cos, sin, B, T, heads, HS, stride);
    round_into(dx, v);
  }

  static void swiglu_forward(bf16* out, const bf16* inp, int64_t N, int F) {
    Vec x = widen(inp, N * 2 * F), o(static_cast<size_t>(N * F));
    fp32().swiglu_forward(o.data(), x.data(), N, F);
    round_into(out, o);
  }

  static void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N, int F) {
    Vec dx = widen(dinp, N * 2 * F), x = widen(inp, N * 2 * F), dy = widen(dout, N * F);
    fp32().swiglu_backward(dx.data(), x.data(), dy.data(), N, F);
    round_into(dinp, dx);
  }

  static void repeat_kv_forward(bf16* out, const bf16* inp, int64_t N, int NH, int NKV, int HS) {
    Vec x = widen(inp, N * (NH + 2 * NKV) * HS), o(static_cast<size_t>(N * 3 * NH * HS));
    fp32().repeat_kv_forward(o.data(), x.data(), N, NH, NKV, HS);
    round_into(out, o);
  }

  static void repeat_kv_backward(bf16* dinp, const bf16* dout, int64_t N, int NH, int NKV, int HS) {
    Vec dx = widen(dinp, N * (NH + 2 * NKV) * HS), dy = widen(dout, N * 3 * NH * HS);
    fp32().repeat_kv_backward(dx.data(), dy.data(), N, NH, NKV, HS);
    round_into(dinp, dx);
  }

  // inference with a KV cache: the cache holds bf16 rows (an append moves bits: round(widen(x)) = x)
  static void kv_cache_append(bf16* kcache, bf16* vcache, const bf16* qkv, int B, int n, int pos, int Tc, int NH,
                              int NKV, int HS) {
    const int Q = NH * HS, K = NKV * HS;
    for (int64_t r = 0; r < static_cast<int64_t>(B) * n; r++) {
      const int64_t b = r / n, i = r % n;
      const bf16* row = qkv + r * (Q + 2 * K);
      std::memcpy(kcache + (b * Tc + pos + i) * K, row + Q, sizeof(bf16) * static_cast<size_t>(K));
      std::memcpy(vcache + (b * Tc + pos + i) * K, row + Q + K, sizeof(bf16) * static_cast<size_t>(K));
    }
  }

  static void attention_cached_forward(bf16* out, const bf16* qkv, const bf16* kcache, const bf16* vcache, int B,
                                       int n, int pos, int Tc, int NH, int NKV, int HS) {
    const int64_t rows = static_cast<int64_t>(B) * n, cache = static_cast<int64_t>(B) * Tc * NKV * HS;
    Vec x = widen(qkv, rows * (NH + 2 * NKV) * HS), k = widen(kcache, cache), v = widen(vcache, cache),
        o(static_cast<size_t>(rows * NH * HS));
    fp32().attention_cached_forward(o.data(), x.data(), k.data(), v.data(), B, n, pos, Tc, NH, NKV, HS);
    round_into(out, o);
  }

  // The two steps above, the bf16 probabilities in dlogits between them (ops.hpp's definition).
  static void softmax_crossentropy_forward_backward(float* losses, bf16* dlogits, const bf16* logits,
                                                    const float* maxv, const float* sums, const int* targets,
                                                    const float* weights, float dloss, int64_t N, int Vvalid, int Vs,
                                                    int vocab_begin) {
    softmax_crossentropy_forward(losses, dlogits, logits, maxv, sums, N, Vvalid, Vs);
    softmax_crossentropy_backward(dlogits, dlogits, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
  }

  static void adamw_update(float* master, bf16* params, float* m, float* v, const float* grads, int64_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    // master, m, v, grads [n] fp32; params [n] bf16 = round(master) after the step
    fp32().adamw_update(master, nullptr, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
    for (int64_t i = 0; i < n; i++) params[i] = f32_to_bf16(master[i]);
  }
};

void cast_from_f32(bf16* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = f32_to_bf16(in[i]);
}

void cast_to_f32(float* out, const bf16* in, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = bf16_to_f32(in[i]);
}

template <Backend kFp32>
OpsBf16 widened_table() {
  using W = Widened<kFp32>;
  OpsBf16 table{};
  AXONN_OPS_ON_E(AXONN_FILL_OPS, W)
  table.sum_squares = W::fp32().sum_squares;  // of the fp32 gradients: the fp32 table's
  table.cast_from_f32 = cast_from_f32;
  table.cast_to_f32 = cast_to_f32;
  AXONN_OPS_KV_CACHE(AXONN_FILL_OPS, W)
  return table;
}

}  // namespace

const OpsBf16& ref_bf16_ops() {
  static const OpsBf16 table = widened_table<Backend::kRef>();
  return table;
}

const OpsBf16& cpu_bf16_ops() {
  // the matmuls run bf16 GEMMs and the lookup copies bf16 rows (cpu/ops_cpu_bf16.cpp); the blocks'
  // memory-bound ops, AdamW and the casts work on bf16 directly (cpu/, one file per op family); the rest widens
  static const OpsBf16 table = [] {
    OpsBf16 t = widened_table<Backend::kCpu>();
    t.embedding_forward = cpu::embedding_forward;
    t.matmul_forward = cpu::matmul_forward;
    t.matmul_backward = cpu::matmul_backward;
    t.position_forward = cpu::position_forward;
    t.layernorm_sum = cpu::layernorm_sum;
    t.layernorm_centred_sumsq = cpu::layernorm_centred_sumsq;
    t.layernorm_forward = cpu::layernorm_forward;
    t.layernorm_backward_sums = cpu::layernorm_backward_sums;
    t.layernorm_backward = cpu::layernorm_backward;
    t.gelu_forward = cpu::gelu_forward;
    t.gelu_backward = cpu::gelu_backward;
    t.residual_forward = cpu::residual_forward;
    t.residual_backward = cpu::residual_backward;
    t.crossentropy_max = cpu::crossentropy_max;
    t.crossentropy_sums = cpu::crossentropy_sums;
    t.softmax_crossentropy_forward = cpu::softmax_crossentropy_forward;
    t.softmax_crossentropy_backward = cpu::softmax_crossentropy_backward;
    t.softmax_crossentropy_forward_backward = cpu::softmax_crossentropy_forward_backward;
    t.adamw_update = cpu::adamw_update;
    t.cast_from_f32 = cpu::cast_to_bf16;
    t.cast_to_f32 = cpu::cast_to_f32;
    t.rmsnorm_sumsq = cpu::rmsnorm_sumsq;
    t.rmsnorm_forward = cpu::rmsnorm_forward;
    t.rmsnorm_backward_dot = cpu::rmsnorm_backward_dot;
    t.rmsnorm_backward = cpu::rmsnorm_backward;
    t.rope_forward = cpu::rope_forward;
    t.rope_backward = cpu::rope_backward;
    t.swiglu_forward = cpu::swiglu_forward;
    t.swiglu_backward = cpu::swiglu_backward;
    t.repeat_kv_forward = cpu::repeat_kv_forward;
    t.repeat_kv_backward = cpu::repeat_kv_backward;
    t.attention_forward = cpu::attention_forward;
    t.attention_backward = cpu::attention_backward;
    t.kv_cache_append = cpu::kv_cache_append;
    t.attention_cached_forward = cpu::attention_cached_forward;
    return t;
  }();
  return table;
}

}  // namespace axonn::kernels
