// kernels/cpu/attention.cpp — causal self-attention: fp32 on [T, T] probabilities, bf16 flash-style on bf16 GEMMs; inference over the KV cache.
#include "row_ops.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

namespace {
// The softmax of a causal row of scores in place: over row[0, valid), zeros in [valid, n). Returns the row's
// log-sum-exp.
inline float causal_softmax_row(float* row, int valid, int n) {
  float maxv = -1e30f;
  for (int t2 = 0; t2 < valid; t2++) maxv = std::max(maxv, row[t2]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int t2 = 0; t2 < valid; t2++) {
    row[t2] = std::exp(row[t2] - maxv);
    sum += row[t2];
  }
  float inv = 1.0f / sum;
#pragma omp simd
  for (int t2 = 0; t2 < valid; t2++) row[t2] *= inv;
  for (int t2 = valid; t2 < n; t2++) row[t2] = 0.0f;
  return maxv + std::log(sum);
}

// The softmax's backward on a causal row, in place: d <- p (d - sum(p d)) scale over [0, valid), zeros in
// [valid, n).
inline void causal_softmax_backward_row(float* d, const float* p, int valid, int n, float scale) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int t2 = 0; t2 < valid; t2++) dot += p[t2] * d[t2];
#pragma omp simd
  for (int t2 = 0; t2 < valid; t2++) d[t2] = p[t2] * (d[t2] - dot) * scale;
  for (int t2 = valid; t2 < n; t2++) d[t2] = 0.0f;
}
}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  // out [B,T,C], att [B,NH,T,T], qkv [B,T,3C]. One (b, h) per task; two GEMMs each (the GEMMs
  // run single-threaded inside the parallel region). The upper triangle is computed and then
  // masked: simpler than a blocked causal GEMM, and attention is a small share of the FLOPs.
  int HS = C / NH;
  float scale = 1.0f / std::sqrt((float)HS);
  int64_t C3 = 3 * (int64_t)C;
#pragma omp parallel for schedule(static) collapse(2)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float* q = qkv + (int64_t)b * T * C3 + h * HS;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* a = att + ((int64_t)b * NH + h) * T * T;
      sgemm(false, true, T, T, HS, scale, q, C3, k, C3, 0.0f, a, T);  // a = scale q k^T
      // (these loops are causal_softmax_row's, written out: through the helper, -ffast-math compiled them to
      // other last bits, and the fp32 attention keeps its numerics)
      for (int t = 0; t < T; t++) {
        float* row = a + (int64_t)t * T;
        float maxv = -1e30f;
        for (int t2 = 0; t2 <= t; t2++) maxv = std::max(maxv, row[t2]);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int t2 = 0; t2 <= t; t2++) {
          row[t2] = std::exp(row[t2] - maxv);
          sum += row[t2];
        }
        float inv = 1.0f / sum;
#pragma omp simd
        for (int t2 = 0; t2 <= t; t2++) row[t2] *= inv;
        for (int t2 = t + 1; t2 < T; t2++) row[t2] = 0.0f;
      }
      sgemm(false, false, T, HS, T, 1.0f, a, T, v, C3, 0.0f, out + (int64_t)b * T * C + h * HS, C);  // a @ v
    }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* /*out*/,
                        const float* att, int B, int T, int C, int NH) {
  // dqkv [B,T,3C], scratch [B,NH,T,T], dout [B,T,C], qkv [B,T,3C], att [B,NH,T,T]
  int HS = C / NH;
  float scale = 1.0f / std::sqrt((float)HS);
  int64_t C3 = 3 * (int64_t)C;
#pragma omp parallel for schedule(static) collapse(2)
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float* q = qkv + (int64_t)b * T * C3 + h * HS;
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = dqkv + (int64_t)b * T * C3 + h * HS;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* dy = dout + (int64_t)b * T * C + h * HS;
      const float* a = att + ((int64_t)b * NH + h) * T * T;
      float* ds = scratch + ((int64_t)b * NH + h) * T * T;
      sgemm(false, true, T, T, HS, 1.0f, dy, C, v, C3, 0.0f, ds, T);   // d att = dy v^T
      sgemm(true, false, T, HS, T, 1.0f, a, T, dy, C, 1.0f, dv, C3);   // dv += att^T dy
      for (int t = 0; t < T; t++) {  // softmax backward, in place (causal_softmax_backward_row's loops, as above)
        const float* arow = a + (int64_t)t * T;
        float* drow = ds + (int64_t)t * T;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int t2 = 0; t2 <= t; t2++) dot += arow[t2] * drow[t2];
#pragma omp simd
        for (int t2 = 0; t2 <= t; t2++) drow[t2] = arow[t2] * (drow[t2] - dot) * scale;
        for (int t2 = t + 1; t2 < T; t2++) drow[t2] = 0.0f;
      }
      sgemm(false, false, T, HS, T, 1.0f, ds, T, k, C3, 1.0f, dq, C3);  // dq += ds k
      sgemm(true, false, T, HS, T, 1.0f, ds, T, q, C3, 1.0f, dk, C3);   // dk += ds^T q
    }
}

// --- cpu_bf16's attention: flash-style, by blocks of query rows, on bf16 GEMMs ---------------------

namespace {
// Query rows per block: the scores of a block against its causal keys are [64, T] floats per thread,
// never [T, T].
constexpr int kAttentionRows = 64;

// Rows [0, T) of one head (HS channels at `src`, rows `stride` apart) into a contiguous [T, HS] fp32 buffer.
void widen_head(float* dst, const bf16* src, int T, int HS, int64_t stride) {
  for (int t = 0; t < T; t++) {
    const bf16* s = src + t * stride;
    float* d = dst + (int64_t)t * HS;
#pragma omp simd
    for (int i = 0; i < HS; i++) d[i] = bf16_to_f32(s[i]);
  }
}

// The head's rows rounded back into the strided bf16 tensor.
void round_head(bf16* dst, const float* src, int T, int HS, int64_t stride) {
  for (int t = 0; t < T; t++) {
    const float* s = src + (int64_t)t * HS;
    bf16* d = dst + t * stride;
#pragma omp simd
    for (int i = 0; i < HS; i++) d[i] = f32_to_bf16(s[i]);
  }
}

// A block's fp32 rows [rows, keys] rounded into a bf16 operand of the next GEMM.
void round_block(bf16* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) dst[i] = f32_to_bf16(src[i]);
}
}  // namespace

// Every product of the attention is a bf16 GEMM (gemm_bf16: AMX / AVX512-BF16 where the CPU has them), run
// single-threaded inside the parallel region over (b, h), straight on the strided q, k, v, dout of the
// [B,T,3C] and [B,T,C] tensors (no widened copies). The softmax, its backward and every accumulation are
// fp32. The probabilities p and the score gradients ds are rounded to bf16 once, as the operands of the
// GEMMs that follow them (p v, p^T dout, ds k, ds^T q), as a GPU flash attention does; the log-sum-exp and
// D = rowsum(dout * out) are taken from the fp32 values. docs/precision.md states the resulting bounds.
void attention_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
  // out [B,T,C], lse [B,NH,T], qkv [B,T,3C]. One (b, h) per task, by blocks of query rows: the scaled
  // scores of the block's rows against their causal keys (one GEMM), each row's softmax in fp32 and its
  // log-sum-exp, then the rows' output round(p v) (a second GEMM, rounded once into out).
  // The probabilities are never kept: attention_backward takes them again from q, k and lse.
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt((float)HS);
  const int64_t C3 = 3 * (int64_t)C;
#pragma omp parallel
  {
    std::vector<float> scores((size_t)kAttentionRows * T);
    std::vector<bf16> p((size_t)kAttentionRows * T);
#pragma omp for schedule(static) collapse(2)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++) {
        const bf16* q = qkv + (int64_t)b * T * C3 + h * HS;
        const bf16 *k = q + C, *v = q + 2 * C;
        for (int t0 = 0; t0 < T; t0 += kAttentionRows) {
          const int rows = std::min(kAttentionRows, T - t0), keys = t0 + rows;  // keys [0, keys): causal
          float* sc = scores.data();
          gemm_bf16(false, true, rows, keys, HS, scale, q + t0 * C3, C3, k, C3, 0.0f, sc, keys);
          for (int r = 0; r < rows; r++)
            lse[((int64_t)b * NH + h) * T + t0 + r] = causal_softmax_row(sc + (int64_t)r * keys, t0 + r + 1, keys);
          round_block(p.data(), sc, (int64_t)rows * keys);
          gemm_bf16_round(false, false, rows, HS, keys, p.data(), keys, v, C3, nullptr, false,
                          out + ((int64_t)b * T + t0) * C + h * HS, C);  // p v
        }
      }
  }
}

void attention_backward(bf16* dqkv, float* scratch, const bf16* dout, const bf16* qkv, const bf16* out,
                        const float* lse, int B, int T, int C, int NH) {
  // dqkv [B,T,3C] (added to), scratch [B,NH,T] (D = rowsum(dout * out), the contract's), dout [B,T,C], qkv
  // [B,T,3C], out [B,T,C] and lse [B,NH,T] from the forward. One (b, h) per task; the head's gradients are
  // summed in fp32 buffers that start from the old gradients. By blocks of query rows: the probabilities
  // again from the scores and lse, dv += p^T dout, dp = dout v^T, ds = p (dp - rowsum(p dp)) scale,
  // dq += ds k, dk += ds^T q. A block holds its rows' every causal key, so rowsum(p dp) is summed over the
  // whole row, as the fp32 backward does. The gradients are rounded once, at the end.
  const int HS = C / NH;
  const float scale = 1.0f / std::sqrt((float)HS);
  const int64_t C3 = 3 * (int64_t)C;
#pragma omp parallel
  {
    const size_t head = (size_t)T * HS;
    std::vector<float> dq(head), dk(head), dv(head);
    std::vector<float> p((size_t)kAttentionRows * T), dp((size_t)kAttentionRows * T);
    std::vector<bf16> p16((size_t)kAttentionRows * T), ds16((size_t)kAttentionRows * T);
#pragma omp for schedule(static) collapse(2)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++) {
        const bf16* q = qkv + (int64_t)b * T * C3 + h * HS;
        const bf16 *k = q + C, *v = q + 2 * C;
        const bf16* dy = dout + (int64_t)b * T * C + h * HS;
        const bf16* y = out + (int64_t)b * T * C + h * HS;
        bf16* grad = dqkv + (int64_t)b * T * C3 + h * HS;
        widen_head(dq.data(), grad, T, HS, C3);
        widen_head(dk.data(), grad + C, T, HS, C3);
        widen_head(dv.data(), grad + 2 * C, T, HS, C3);
        const float* row_lse = lse + ((int64_t)b * NH + h) * T;
        float* row_d = scratch + ((int64_t)b * NH + h) * T;
        for (int t = 0; t < T; t++) {
          float D = 0.0f;
          for (int i = 0; i < HS; i++) D += bf16_to_f32(dy[t * C + i]) * bf16_to_f32(y[t * C + i]);
          row_d[t] = D;
        }
        for (int t0 = 0; t0 < T; t0 += kAttentionRows) {
          const int rows = std::min(kAttentionRows, T - t0), keys = t0 + rows;
          const int64_t block = (int64_t)rows * keys;
          const bf16* qb = q + t0 * C3;
          const bf16* dyb = dy + (int64_t)t0 * C;
          gemm_bf16(false, true, rows, keys, HS, scale, qb, C3, k, C3, 0.0f, p.data(), keys);  // scores
          for (int r = 0; r < rows; r++) {
            const int t = t0 + r;
            float* row = p.data() + (int64_t)r * keys;
#pragma omp simd
            for (int t2 = 0; t2 <= t; t2++) row[t2] = std::exp(row[t2] - row_lse[t]);
            for (int t2 = t + 1; t2 < keys; t2++) row[t2] = 0.0f;
          }
          round_block(p16.data(), p.data(), block);
          gemm_bf16(true, false, keys, HS, rows, 1.0f, p16.data(), keys, dyb, C, 1.0f, dv.data(), HS);  // dv += p^T dy
          gemm_bf16(false, true, rows, keys, HS, 1.0f, dyb, C, v, C3, 0.0f, dp.data(), keys);           // dp = dy v^T
          for (int r = 0; r < rows; r++)  // softmax backward, in place in dp
            causal_softmax_backward_row(dp.data() + (int64_t)r * keys, p.data() + (int64_t)r * keys, t0 + r + 1, keys,
                                        scale);
          round_block(ds16.data(), dp.data(), block);
          gemm_bf16(false, false, rows, HS, keys, 1.0f, ds16.data(), keys, k, C3, 1.0f, dq.data() + (int64_t)t0 * HS,
                    HS);                                                                                 // dq += ds k
          gemm_bf16(true, false, keys, HS, rows, 1.0f, ds16.data(), keys, qb, C3, 1.0f, dk.data(), HS);  // dk += ds^T q
        }
        round_head(grad, dq.data(), T, HS, C3);
        round_head(grad + C, dk.data(), T, HS, C3);
        round_head(grad + 2 * C, dv.data(), T, HS, C3);
      }
  }
}

// --- inference with a KV cache ------------------------------------------------------------------
// Written once for both storages: fp32, and bf16 (the cache holds the rows' bf16 bits; every product and the
// softmax in fp32, each output rounded once).

namespace {
template <class S>
void append_to_cache(S* kcache, S* vcache, const S* qkv, int B, int n, int pos, int Tc, int NH, int NKV, int HS) {
  // kcache, vcache [B, Tc, NKV HS]; qkv [B n, (NH + 2 NKV) HS]: each row's k and v copied whole
  const int Q = NH * HS, K = NKV * HS;
  const size_t bytes = sizeof(S) * static_cast<size_t>(K);
#pragma omp parallel for schedule(static) collapse(2)
  for (int b = 0; b < B; b++)
    for (int i = 0; i < n; i++) {
      const S* row = qkv + ((int64_t)b * n + i) * (Q + 2 * K);
      std::memcpy(kcache + ((int64_t)b * Tc + pos + i) * K, row + Q, bytes);
      std::memcpy(vcache + ((int64_t)b * Tc + pos + i) * K, row + Q + K, bytes);
    }
}

template <class S>
void attend_over_cache(S* out, const S* qkv, const S* kcache, const S* vcache, int B, int n, int pos, int Tc, int NH,
                       int NKV, int HS) {
  // out [B n, NH HS]; qkv [B n, (NH + 2 NKV) HS]; kcache, vcache [B, Tc, NKV HS]. One (b, h, i) per
  // task: scores against the cache's keys, softmax, then the weighted sum of its values (decode has
  // n = 1: a matrix-vector product per head, too small for a GEMM to pay).
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
  const float scale = 1.0f / std::sqrt((float)HS);
#pragma omp parallel
  {
    std::vector<float> a(static_cast<size_t>(Tc)), q(static_cast<size_t>(HS)), o(static_cast<size_t>(HS));
#pragma omp for schedule(static) collapse(3)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < n; i++) {
          const int t = pos + i;  // the query's position: it sees the cache's positions [0, t]
          const S* qs = qkv + ((int64_t)b * n + i) * (Q + 2 * K) + h * HS;
          for (int j = 0; j < HS; j++) q[j] = ld(qs[j]);
          const S* kc = kcache + (int64_t)b * Tc * K + (h / G) * HS;
          const S* vc = vcache + (int64_t)b * Tc * K + (h / G) * HS;
          float maxv = -1e30f;
          for (int t2 = 0; t2 <= t; t2++) {
            const S* k = kc + (int64_t)t2 * K;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int j = 0; j < HS; j++) dot += q[j] * ld(k[j]);
            a[t2] = dot * scale;
            maxv = std::max(maxv, a[t2]);
          }
          float sum = 0.0f;
          for (int t2 = 0; t2 <= t; t2++) {
            a[t2] = std::exp(a[t2] - maxv);
            sum += a[t2];
          }
          const float inv = 1.0f / sum;
          std::fill(o.begin(), o.end(), 0.0f);
          for (int t2 = 0; t2 <= t; t2++) {
            const S* v = vc + (int64_t)t2 * K;
            const float w = a[t2] * inv;
#pragma omp simd
            for (int j = 0; j < HS; j++) o[j] += w * ld(v[j]);
          }
          S* dst = out + ((int64_t)b * n + i) * Q + h * HS;
          for (int j = 0; j < HS; j++) st(dst + j, o[j]);
        }
  }
}
}  // namespace

void kv_cache_append(float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS) {
  append_to_cache(kcache, vcache, qkv, B, n, pos, Tc, NH, NKV, HS);
}
void kv_cache_append(bf16* kcache, bf16* vcache, const bf16* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS) {
  append_to_cache(kcache, vcache, qkv, B, n, pos, Tc, NH, NKV, HS);
}

void attention_cached_forward(float* out, const float* qkv, const float* kcache, const float* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS) {
  attend_over_cache(out, qkv, kcache, vcache, B, n, pos, Tc, NH, NKV, HS);
}
void attention_cached_forward(bf16* out, const bf16* qkv, const bf16* kcache, const bf16* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS) {
  attend_over_cache(out, qkv, kcache, vcache, B, n, pos, Tc, NH, NKV, HS);
}

}  // namespace axonn::kernels::cpu
