// kernels/cpu — the fast CPU implementations: GEMMs through the GEMM backend (gemm.hpp), the
// memory-bound ops as OpenMP loops over rows with SIMD inner loops. Compiled with -ffast-math so
// that expf/tanhf vectorise (glibc's libmvec); results agree with `ref` to fp32 rounding, which
// tests/unit/kernels checks.
//
// Reductions across rows (LayerNorm's weight and bias gradients) use per-thread partial sums added
// in thread order, and scatters (embedding gradients) are split by channel, so every op is
// deterministic for a given thread count.
//
// The memory-bound ops of the GPT-2 and Llama blocks are written once, as templates over the storage type E of
// their activations: float for the fp32 table, bf16 for cpu_bf16 (ops_bf16.hpp's precision contract).
// The arithmetic is fp32 in registers either way. A bf16 value is widened when it is loaded (exact) and
// rounded once when it is stored. A row op's reductions run on an fp32 row, so that they sum in the same
// order for both storages: for fp32 it is the tensor's own row, for bf16 a per-thread row buffer it is
// widened into (RowView). So for bf16 storage each op gives round(the fp32 op on the widened inputs), bit
// for bit, without an fp32 copy of the whole tensor (tests/unit/kernels_bf16 checks it). GELU, whose
// tanhf gives other bits in a vector lane than in scalar code, runs through elementwise() for the same.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <type_traits>

#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/kernels/gemm.hpp"
#include "axonn/kernels/gemm_tuner.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels::cpu {

namespace {
constexpr float kLayerNormEps = 1e-5f;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

// Range [begin, end) of `n` items owned by thread `tid` of `nthr` (static split).
inline void split_range(int64_t n, int tid, int nthr, int64_t* begin, int64_t* end) {
  int64_t chunk = (n + nthr - 1) / nthr;
  *begin = std::min<int64_t>(n, chunk * tid);
  *end = std::min<int64_t>(n, *begin + chunk);
}

// Loads and stores of the storage types: fp32 arithmetic on both.
inline float ld(float x) { return x; }
inline float ld(bf16 x) { return bf16_to_f32(x); }
inline void st(float* p, float v) { *p = v; }
inline void st(bf16* p, float v) { *p = f32_to_bf16(v); }

template <class E>
constexpr bool kIsF32 = std::is_same_v<E, float>;

// An fp32 view of rows of E storage, for the row ops. For fp32 it is the row itself and costs nothing;
// for bf16 it is one row of fp32 in a buffer of the thread that owns it (make one per thread, inside the
// parallel region): widened on read(), rounded into the row on commit().
template <class E>
class RowView {
 public:
  explicit RowView(int64_t n) : buf_(kIsF32<E> ? 0 : static_cast<size_t>(n)) {}
  // the values of row[0, n) to read
  const float* read(const E* row, int64_t n) {
    if constexpr (kIsF32<E>) {
      return row;
    } else {
      for (int64_t i = 0; i < n; i++) buf_[static_cast<size_t>(i)] = bf16_to_f32(row[i]);
      return buf_.data();
    }
  }
  // the values of row[0, n) to update in place (commit() afterwards)
  float* update(E* row, int64_t n) {
    if constexpr (kIsF32<E>) {
      return row;
    } else {
      read(row, n);
      return buf_.data();
    }
  }
  // where to write row[0, n) (commit() afterwards)
  float* write(E* row) {
    if constexpr (kIsF32<E>) {
      return row;
    } else {
      return buf_.data();
    }
  }
  // rounds the written or updated values into row[0, n) (nothing to do for fp32)
  void commit(E* row, int64_t n) {
    if constexpr (!kIsF32<E>) {
#pragma omp simd
      for (int64_t i = 0; i < n; i++) row[i] = f32_to_bf16(buf_[static_cast<size_t>(i)]);
    }
  }

 private:
  std::vector<float> buf_;
};
}  // namespace

void embedding_forward(float* out, const int* inp, const float* wte, int row_begin, int R, int64_t N, int C) {
  // out [N,C], inp [N], wte [R,C] holding vocabulary rows [row_begin, row_begin + R)
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    float* o = out + n * C;
    int r = inp[n] - row_begin;
    if (r >= 0 && r < R) {
      std::memcpy(o, wte + (int64_t)r * C, sizeof(float) * C);
    } else {
      std::memset(o, 0, sizeof(float) * C);
    }
  }
}

void embedding_backward(float* dwte, const float* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  // dwte [R,C], dout [N,C], inp [N]. Split by channel: no two threads touch the same gradient
  // element, whatever tokens repeat.
#pragma omp parallel
  {
    int64_t c0, c1;
    split_range(C, omp_get_thread_num(), omp_get_num_threads(), &c0, &c1);
    for (int64_t n = 0; n < N; n++) {
      int r = inp[n] - row_begin;
      if (r < 0 || r >= R) continue;
      const float* d = dout + n * C;
      float* dw = dwte + (int64_t)r * C;
#pragma omp simd
      for (int64_t i = c0; i < c1; i++) dw[i] += d[i];
    }
  }
}

namespace {
template <class E>
void position_forward_impl(E* out, const E* wpe, int B, int T, int C) {
  // out [B,T,C] (added to), wpe [maxT,C]
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < (int64_t)B * T; bt++) {
    E* o = out + bt * C;
    const E* p = wpe + (bt % T) * C;
#pragma omp simd
    for (int i = 0; i < C; i++) st(o + i, ld(o[i]) + ld(p[i]));
  }
}
}  // namespace

void position_forward(float* out, const float* wpe, int B, int T, int C) { position_forward_impl(out, wpe, B, T, C); }
void position_forward(bf16* out, const bf16* wpe, int B, int T, int C) { position_forward_impl(out, wpe, B, T, C); }

void position_backward(float* dwpe, const float* dout, int B, int T, int C) {
  // dwpe [maxT,C], dout [B,T,C]: each thread owns whole positions
#pragma omp parallel for schedule(static)
  for (int t = 0; t < T; t++) {
    float* dp = dwpe + (int64_t)t * C;
    for (int b = 0; b < B; b++) {
      const float* d = dout + ((int64_t)b * T + t) * C;
#pragma omp simd
      for (int i = 0; i < C; i++) dp[i] += d[i];
    }
  }
}

namespace {
template <class E>
void layernorm_sum_impl(float* mean, const E* inp, int64_t N, int C) {
  // mean [N], inp [N,C]: this rank's row sums
#pragma omp parallel
  {
    RowView<E> in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float m = 0.0f;
#pragma omp simd reduction(+ : m)
      for (int i = 0; i < C; i++) m += x[i];
      mean[n] = m;
    }
  }
}

template <class E>
void layernorm_centred_sumsq_impl(float* var, float* mean, const E* inp, int64_t N, int C, int C_total) {
  // var [N], mean [N] (the complete sums in, the means out), inp [N,C]
#pragma omp parallel
  {
    RowView<E> in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float m = mean[n] / (float)C_total;
      mean[n] = m;
      float v = 0.0f;
#pragma omp simd reduction(+ : v)
      for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
      var[n] = v;
    }
  }
}

template <class E>
void layernorm_forward_impl(E* out, const float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                            int64_t N, int C, int C_total) {
  // out [N,C], mean [N], rstd [N] (the complete centred sums of squares in), inp [N,C], weight [C], bias [C]
  RowView<E> weight_view(C), bias_view(C);
  const float* w = weight_view.read(weight, C);
  const float* b = bias_view.read(bias, C);
#pragma omp parallel
  {
    RowView<E> in_row(C), out_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float m = mean[n], s = 1.0f / std::sqrt(rstd[n] / (float)C_total + kLayerNormEps);
      rstd[n] = s;
      float* o = out_row.write(out + n * C);
#pragma omp simd
      for (int i = 0; i < C; i++) o[i] = s * (x[i] - m) * w[i] + b[i];
      out_row.commit(out + n * C, C);
    }
  }
}

template <class E>
void layernorm_backward_sums_impl(float* sums, const E* dout, const E* inp, const E* weight, const float* mean,
                                  const float* rstd, int64_t N, int C) {
  // sums [2N]: [N] sum(dnorm) | [N] sum(dnorm * xhat) over this rank's channels
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
#pragma omp parallel
  {
    RowView<E> dout_row(C), in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float m = mean[n], s = rstd[n];
      float s1 = 0.0f, s2 = 0.0f;
#pragma omp simd reduction(+ : s1, s2)
      for (int i = 0; i < C; i++) {
        float xhat = (x[i] - m) * s;
        float dnorm = w[i] * dy[i];
        s1 += dnorm;
        s2 += dnorm * xhat;
      }
      sums[n] = s1;
      sums[N + n] = s2;
    }
  }
}

template <class E>
void layernorm_backward_impl(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp, const E* weight,
                             const float* mean, const float* rstd, const float* sums, int64_t N, int C, int C_total) {
  // dinp [N,C], dweight [C], dbias [C], dout [N,C], inp [N,C], weight [C], mean [N], rstd [N], sums [2N]
  // (complete); the weight and bias gradients as per-thread partials added in order
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
  int nthr = omp_get_max_threads();
  std::vector<float> partial((size_t)nthr * 2 * C, 0.0f);  // per thread: dweight | dbias
#pragma omp parallel num_threads(nthr)
  {
    int tid = omp_get_thread_num();
    float* pw = partial.data() + (size_t)tid * 2 * C;
    float* pb = pw + C;
    RowView<E> dout_row(C), in_row(C), dinp_row(C);
    int64_t n0, n1;
    split_range(N, tid, omp_get_num_threads(), &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float* dx = dinp_row.update(dinp + n * C, C);
      float m = mean[n], s = rstd[n];
      float dnorm_mean = sums[n] / (float)C_total, dnorm_norm_mean = sums[N + n] / (float)C_total;
#pragma omp simd
      for (int i = 0; i < C; i++) {
        float xhat = (x[i] - m) * s;
        float dnorm = w[i] * dy[i];
        pb[i] += dy[i];
        pw[i] += xhat * dy[i];
        dx[i] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * s;
      }
      dinp_row.commit(dinp + n * C, C);
    }
  }
  for (int t = 0; t < nthr; t++) {
    const float* pw = partial.data() + (size_t)t * 2 * C;
    for (int i = 0; i < C; i++) {
      dweight[i] += pw[i];
      dbias[i] += pw[C + i];
    }
  }
}
}  // namespace

void layernorm_sum(float* mean, const float* inp, int64_t N, int C) { layernorm_sum_impl(mean, inp, N, C); }
void layernorm_sum(float* mean, const bf16* inp, int64_t N, int C) { layernorm_sum_impl(mean, inp, N, C); }
void layernorm_centred_sumsq(float* var, float* mean, const float* inp, int64_t N, int C, int C_total) {
  layernorm_centred_sumsq_impl(var, mean, inp, N, C, C_total);
}
void layernorm_centred_sumsq(float* var, float* mean, const bf16* inp, int64_t N, int C, int C_total) {
  layernorm_centred_sumsq_impl(var, mean, inp, N, C, C_total);
}
void layernorm_forward(float* out, const float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int C, int C_total) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, C_total);
}
void layernorm_forward(bf16* out, const float* mean, float* rstd, const bf16* inp, const bf16* weight,
                       const bf16* bias, int64_t N, int C, int C_total) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, C_total);
}
void layernorm_backward_sums(float* sums, const float* dout, const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t N, int C) {
  layernorm_backward_sums_impl(sums, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward_sums(float* sums, const bf16* dout, const bf16* inp, const bf16* weight, const float* mean,
                             const float* rstd, int64_t N, int C) {
  layernorm_backward_sums_impl(sums, dout, inp, weight, mean, rstd, N, C);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, sums, N, C, C_total);
}
void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const bf16* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, sums, N, C, C_total);
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int C,
                    int OC) {
  // out [N,OC], inp [N,C], weight [OC,C], bias [OC]: out = bias (broadcast) + inp @ weight^T
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) std::memcpy(out + n * OC, bias, sizeof(float) * OC);
  }
  tuned_sgemm("fw", {.trans_a = false, .trans_b = true, .M = N, .N = OC, .K = C, .alpha = 1.0f, .A = inp, .lda = C,
                     .B = weight, .ldb = C, .beta = bias ? 1.0f : 0.0f, .C = out, .ldc = OC});
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int C, int OC) {
  // dinp [N,C], dweight [OC,C], dbias [OC], dout [N,OC], inp [N,C], weight [OC,C]
  // Each output is optional, so a caller can split the dX and dW GEMMs (to overlap a collective
  // between them) and get exactly the bits of the combined call.
  // The GEMMs go through the layout tuner when --gemm-tuning is on (sites named as in spec §6).
  if (dinp)  // dinp += dout @ W
    tuned_sgemm("bw_act", {.trans_a = false, .trans_b = false, .M = N, .N = C, .K = OC, .alpha = 1.0f, .A = dout,
                           .lda = OC, .B = weight, .ldb = C, .beta = 1.0f, .C = dinp, .ldc = C});
  if (dweight)  // dweight += dout^T @ inp
    tuned_sgemm("bw_w", {.trans_a = true, .trans_b = false, .M = OC, .N = C, .K = N, .alpha = 1.0f, .A = dout,
                         .lda = OC, .B = inp, .ldb = C, .beta = 1.0f, .C = dweight, .ldc = C});
  if (dbias) {
    // column sums, split by column so each thread owns its outputs
#pragma omp parallel
    {
      int64_t o0, o1;
      split_range(OC, omp_get_thread_num(), omp_get_num_threads(), &o0, &o1);
      for (int64_t n = 0; n < N; n++) {
        const float* d = dout + n * OC;
#pragma omp simd
        for (int64_t o = o0; o < o1; o++) dbias[o] += d[o];
      }
    }
  }
}

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

namespace {
// GELU and its slope, the formulas of ops.hpp
inline float gelu_value(float x) {
  float cube = 0.044715f * x * x * x;
  return 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
}
inline float gelu_slope(float x) {
  float cube = 0.044715f * x * x * x;
  float th = std::tanh(kGeluScale * (x + cube));
  float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

// An elementwise op whose math function gives other last bits in a vector lane than in scalar code
// (libmvec's tanhf against tanhf): `block(out, a, b, n)` is its fp32 loop over n elements. Each thread
// takes a range that starts at a multiple of 64 elements (of any vector width), so every element but the
// last N mod width of the array is in a full vector, whatever the storage type and the thread count. bf16
// storage widens blocks of 4096 elements into fp32 buffers, runs the same loop on them and rounds once:
// round(the fp32 op), bit for bit.
template <class E, class Block>
void elementwise(E* out, bool accumulate, const E* a, const E* b, int64_t N, Block block) {
  constexpr int64_t kUnit = 64, kBlock = 4096;
  const int64_t units = (N + kUnit - 1) / kUnit;
#pragma omp parallel
  {
    int64_t u0, u1;
    split_range(units, omp_get_thread_num(), omp_get_num_threads(), &u0, &u1);
    const int64_t begin = std::min(N, u0 * kUnit), end = std::min(N, u1 * kUnit);
    if constexpr (kIsF32<E>) {
      (void)accumulate;
      block(out + begin, a + begin, b ? b + begin : nullptr, end - begin);
    } else {
      std::vector<float> fo(kBlock), fa(kBlock), fb(b ? kBlock : 0);
      for (int64_t at = begin; at < end; at += kBlock) {
        const int64_t n = std::min(kBlock, end - at);
        for (int64_t i = 0; i < n; i++) fa[i] = bf16_to_f32(a[at + i]);
        for (int64_t i = 0; b && i < n; i++) fb[i] = bf16_to_f32(b[at + i]);
        for (int64_t i = 0; accumulate && i < n; i++) fo[i] = bf16_to_f32(out[at + i]);
        block(fo.data(), fa.data(), fb.data(), n);
#pragma omp simd
        for (int64_t i = 0; i < n; i++) out[at + i] = f32_to_bf16(fo[i]);
      }
    }
  }
}

template <class E>
void gelu_forward_impl(E* out, const E* inp, int64_t N) {
  elementwise(out, false, inp, static_cast<const E*>(nullptr), N, [](float* o, const float* x, const float*, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = gelu_value(x[i]);
  });
}

template <class E>
void gelu_backward_impl(E* dinp, const E* inp, const E* dout, int64_t N) {
  elementwise(dinp, true, inp, dout, N, [](float* dx, const float* x, const float* dy, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dx[i] += gelu_slope(x[i]) * dy[i];
  });
}

template <class E>
void residual_forward_impl(E* out, const E* a, const E* b, int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < N; i++) st(out + i, ld(a[i]) + ld(b[i]));
}

template <class E>
void residual_backward_impl(E* da, E* db, const E* dout, int64_t N) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < N; i++) {
    const float d = ld(dout[i]);
    st(da + i, ld(da[i]) + d);
    st(db + i, ld(db[i]) + d);
  }
}

// p[i] = exp(z[i] - m) for i < n, and their sum. Not inlined: the sums and the probabilities take the
// exponentials in two calls for a row (they are not kept between the caller's steps) and must get the same
// bits both times.
[[gnu::noinline]] float exp_and_sum(float* p, const float* z, int n, float m) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < n; i++) {
    p[i] = std::exp(z[i] - m);
    sum += p[i];
  }
  return sum;
}

// The cross-entropy's steps (ops.hpp): maxv[N], then sums[2N] = sum of exp | the target's logit, then
// probs and losses; the caller completes maxv and sums over the vocabulary-parallel group between them.
template <class E>
void crossentropy_max_impl(float* maxv, const E* logits, int64_t N, int Vvalid, int Vs) {
#pragma omp parallel
  {
    RowView<E> logit_row(Vvalid);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* z = logit_row.read(logits + n * Vs, Vvalid);
      float m = -1e30f;
#pragma omp simd reduction(max : m)
      for (int i = 0; i < Vvalid; i++) m = std::max(m, z[i]);
      maxv[n] = m;
    }
  }
}

template <class E>
void crossentropy_sums_impl(float* sums, const float* maxv, const E* logits, const int* targets, int64_t N,
                            int Vvalid, int Vs, int vocab_begin) {
#pragma omp parallel
  {
    RowView<E> logit_row(Vvalid);
    std::vector<float> exps(static_cast<size_t>(Vvalid));  // this thread's row of exponentials, not kept
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* z = logit_row.read(logits + n * Vs, Vvalid);
      int t = targets[n] - vocab_begin;
      sums[n] = exp_and_sum(exps.data(), z, Vvalid, maxv[n]);
      sums[N + n] = (t >= 0 && t < Vvalid) ? z[t] : 0.0f;
    }
  }
}

template <class E>
void softmax_crossentropy_forward_impl(float* losses, E* probs, const E* logits, const float* maxv,
                                       const float* sums, int64_t N, int Vvalid, int Vs) {
  // losses [N], probs [N,Vs] (may alias logits: each row is read before it is written), logits [N,Vs]
#pragma omp parallel
  {
    RowView<E> logit_row(Vvalid), prob_row(Vs);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* z = logit_row.read(logits + n * Vs, Vvalid);
      float* p = prob_row.write(probs + n * Vs);
      exp_and_sum(p, z, Vvalid, maxv[n]);  // the exponentials of crossentropy_sums, bit for bit
      float inv = 1.0f / sums[n];
#pragma omp simd
      for (int i = 0; i < Vvalid; i++) p[i] *= inv;
      for (int i = Vvalid; i < Vs; i++) p[i] = 0.0f;
      prob_row.commit(probs + n * Vs, Vs);
      // -log softmax(target) = log(sum exp) + max - logit(target)
      losses[n] = std::log(sums[n]) + maxv[n] - sums[N + n];
    }
  }
}

template <class E>
void softmax_crossentropy_backward_impl(E* dlogits, const E* probs, const int* targets, const float* weights,
                                        float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  // dlogits [N,Vs], probs [N,Vs], targets [N], weights [N] or null
  bool in_place = dlogits == probs;
#pragma omp parallel
  {
    RowView<E> dlogit_row(Vs), prob_row(Vvalid);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      float* dz = dlogit_row.update(dlogits + n * Vs, in_place ? Vvalid : Vs);
      const float d = weights ? dloss * weights[n] : dloss;
      if (in_place) {
#pragma omp simd
        for (int i = 0; i < Vvalid; i++) dz[i] = dz[i] * d;
        for (int i = Vvalid; i < Vs; i++) dz[i] = 0.0f;
      } else {
        const float* p = prob_row.read(probs + n * Vs, Vvalid);
#pragma omp simd
        for (int i = 0; i < Vvalid; i++) dz[i] += p[i] * d;
      }
      int t = targets[n] - vocab_begin;
      if (t >= 0 && t < Vvalid) dz[t] -= d;
      dlogit_row.commit(dlogits + n * Vs, Vs);
    }
  }
}

template <class E>
void adamw_update_impl(float* params, E* params_copy, float* m, float* v, const float* grads, int64_t n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  // params_copy: null for fp32; for bf16 the copy the ops read, round(params), written in the same pass
  float c1 = 1.0f - std::pow(beta1, (float)t);
  float c2 = 1.0f - std::pow(beta2, (float)t);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float g = grads[i] * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] -= lr * ((mi / c1) / (std::sqrt(vi / c2) + eps) + weight_decay * params[i]);
    if constexpr (!kIsF32<E>) params_copy[i] = f32_to_bf16(params[i]);
  }
}
}  // namespace

void gelu_forward(float* out, const float* inp, int64_t N) { gelu_forward_impl(out, inp, N); }
void gelu_forward(bf16* out, const bf16* inp, int64_t N) { gelu_forward_impl(out, inp, N); }
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) { gelu_backward_impl(dinp, inp, dout, N); }
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N) { gelu_backward_impl(dinp, inp, dout, N); }
void residual_forward(float* out, const float* a, const float* b, int64_t N) { residual_forward_impl(out, a, b, N); }
void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t N) { residual_forward_impl(out, a, b, N); }
void residual_backward(float* da, float* db, const float* dout, int64_t N) { residual_backward_impl(da, db, dout, N); }
void residual_backward(bf16* da, bf16* db, const bf16* dout, int64_t N) { residual_backward_impl(da, db, dout, N); }

void crossentropy_max(float* maxv, const float* logits, int64_t N, int Vvalid, int Vs) {
  crossentropy_max_impl(maxv, logits, N, Vvalid, Vs);
}
void crossentropy_max(float* maxv, const bf16* logits, int64_t N, int Vvalid, int Vs) {
  crossentropy_max_impl(maxv, logits, N, Vvalid, Vs);
}
void crossentropy_sums(float* sums, const float* maxv, const float* logits, const int* targets, int64_t N, int Vvalid,
                       int Vs, int vocab_begin) {
  crossentropy_sums_impl(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin);
}
void crossentropy_sums(float* sums, const float* maxv, const bf16* logits, const int* targets, int64_t N, int Vvalid,
                       int Vs, int vocab_begin) {
  crossentropy_sums_impl(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const float* maxv,
                                  const float* sums, int64_t N, int Vvalid, int Vs) {
  softmax_crossentropy_forward_impl(losses, probs, logits, maxv, sums, N, Vvalid, Vs);
}
void softmax_crossentropy_forward(float* losses, bf16* probs, const bf16* logits, const float* maxv, const float* sums,
                                  int64_t N, int Vvalid, int Vs) {
  softmax_crossentropy_forward_impl(losses, probs, logits, maxv, sums, N, Vvalid, Vs);
}
void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  softmax_crossentropy_backward_impl(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}
void softmax_crossentropy_backward(bf16* dlogits, const bf16* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  softmax_crossentropy_backward_impl(dlogits, probs, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}

void adamw_update(float* params, float* copy, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  AXONN_CHECK_ARG(copy == nullptr, "cpu adamw_update: the fp32 table keeps no copy of the weights; pass null");
  adamw_update_impl<float>(params, nullptr, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}
void adamw_update(float* master, bf16* params, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  adamw_update_impl(master, params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}

void cast_to_bf16(bf16* out, const float* in, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = f32_to_bf16(in[i]);
}

void cast_to_f32(float* out, const bf16* in, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = bf16_to_f32(in[i]);
}

double sum_squares(const float* x, int64_t n) {
  double s = 0.0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

// --- the Llama block's ops: rows in parallel, SIMD within a row ---------------------------------

namespace {
template <class E>
void rmsnorm_sumsq_impl(float* sumsq, const E* inp, int64_t N, int C) {
  // sumsq [N], inp [N,C]
#pragma omp parallel
  {
    RowView<E> in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* x = in_row.read(inp + n * C, C);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int i = 0; i < C; i++) s += x[i] * x[i];
      sumsq[n] = s;
    }
  }
}

template <class E>
void rmsnorm_forward_impl(E* out, float* rstd, const E* inp, const E* weight, int64_t N, int C, int C_total,
                          float eps) {
  // out [N,C], rstd [N] (in: sums of squares over C_total channels; out: 1/rms), inp [N,C], weight [C]
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
#pragma omp parallel
  {
    RowView<E> in_row(C), out_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float r = 1.0f / std::sqrt(rstd[n] / (float)C_total + eps);
      rstd[n] = r;
      const float* x = in_row.read(inp + n * C, C);
      float* o = out_row.write(out + n * C);
#pragma omp simd
      for (int i = 0; i < C; i++) o[i] = x[i] * r * w[i];
      out_row.commit(out + n * C, C);
    }
  }
}

template <class E>
void rmsnorm_backward_dot_impl(float* dot, const E* dout, const E* inp, const E* weight, int64_t N, int C) {
  // dot [N], dout [N,C], inp [N,C], weight [C]
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
#pragma omp parallel
  {
    RowView<E> dout_row(C), in_row(C);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int i = 0; i < C; i++) s += dy[i] * w[i] * x[i];
      dot[n] = s;
    }
  }
}

template <class E>
void rmsnorm_backward_impl(E* dinp, float* dweight, const E* dout, const E* inp, const E* weight, const float* rstd,
                           const float* dot, int64_t N, int C, int C_total) {
  // dinp [N,C], dweight [C], dout [N,C], inp [N,C], weight [C], rstd [N], dot [N] (complete); the
  // weight gradient as per-thread partials added in thread order
  RowView<E> weight_view(C);
  const float* w = weight_view.read(weight, C);
  int nthr = omp_get_max_threads();
  std::vector<float> partial((size_t)nthr * C, 0.0f);
#pragma omp parallel num_threads(nthr)
  {
    int tid = omp_get_thread_num();
    float* pw = partial.data() + (size_t)tid * C;
    RowView<E> dout_row(C), in_row(C), dinp_row(C);
    int64_t n0, n1;
    split_range(N, tid, omp_get_num_threads(), &n0, &n1);
    for (int64_t n = n0; n < n1; n++) {
      const float* dy = dout_row.read(dout + n * C, C);
      const float* x = in_row.read(inp + n * C, C);
      float* dx = dinp_row.update(dinp + n * C, C);
      const float r = rstd[n], k = r * r * dot[n] / (float)C_total;
#pragma omp simd
      for (int i = 0; i < C; i++) {
        pw[i] += dy[i] * x[i] * r;
        dx[i] += r * (dy[i] * w[i] - x[i] * k);
      }
      dinp_row.commit(dinp + n * C, C);
    }
  }
  for (int t = 0; t < nthr; t++) {
    const float* pw = partial.data() + (size_t)t * C;
    for (int i = 0; i < C; i++) dweight[i] += pw[i];
  }
}

// The rotate-half rotation of `heads` heads in each row, by +angle (sign 1) or -angle (sign -1).
template <class E>
void rope_rotate(E* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride, float sign) {
  const int half = HS / 2;
  const int64_t rotated = (int64_t)heads * HS;  // the first `heads` heads of each row
#pragma omp parallel
  {
    RowView<E> row(rotated);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < (int64_t)B * T; r++) {
      const float* c = cos + (r % T) * half;
      const float* s = sin + (r % T) * half;
      float* xr = row.update(x + r * stride, rotated);
      for (int h = 0; h < heads; h++) {
        float* v = xr + (int64_t)h * HS;
#pragma omp simd
        for (int i = 0; i < half; i++) {
          const float a = v[i], b = v[i + half], sn = sign * s[i];
          v[i] = a * c[i] - b * sn;
          v[i + half] = b * c[i] + a * sn;
        }
      }
      row.commit(x + r * stride, rotated);
    }
  }
}

template <class E>
void swiglu_forward_impl(E* out, const E* inp, int64_t N, int F) {
  // out [N,F], inp [N,2F] = gate | up
#pragma omp parallel
  {
    RowView<E> in_row(2 * F), out_row(F);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* g = in_row.read(inp + n * 2 * F, 2 * F);
      const float* u = g + F;
      float* o = out_row.write(out + n * F);
#pragma omp simd
      for (int i = 0; i < F; i++) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      out_row.commit(out + n * F, F);
    }
  }
}

template <class E>
void swiglu_backward_impl(E* dinp, const E* inp, const E* dout, int64_t N, int F) {
  // dinp [N,2F], inp [N,2F], dout [N,F]
#pragma omp parallel
  {
    RowView<E> in_row(2 * F), dout_row(F), dinp_row(2 * F);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const float* g = in_row.read(inp + n * 2 * F, 2 * F);
      const float* u = g + F;
      const float* d = dout_row.read(dout + n * F, F);
      float* dg = dinp_row.update(dinp + n * 2 * F, 2 * F);
      float* du = dg + F;
#pragma omp simd
      for (int i = 0; i < F; i++) {
        const float sig = 1.0f / (1.0f + std::exp(-g[i]));
        dg[i] += d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
        du[i] += d[i] * g[i] * sig;
      }
      dinp_row.commit(dinp + n * 2 * F, 2 * F);
    }
  }
}
}  // namespace

void rmsnorm_sumsq(float* sumsq, const float* inp, int64_t N, int C) { rmsnorm_sumsq_impl(sumsq, inp, N, C); }
void rmsnorm_sumsq(float* sumsq, const bf16* inp, int64_t N, int C) { rmsnorm_sumsq_impl(sumsq, inp, N, C); }
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int C, int C_total,
                     float eps) {
  rmsnorm_forward_impl(out, rstd, inp, weight, N, C, C_total, eps);
}
void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const bf16* weight, int64_t N, int C, int C_total,
                     float eps) {
  rmsnorm_forward_impl(out, rstd, inp, weight, N, C, C_total, eps);
}
void rmsnorm_backward_dot(float* dot, const float* dout, const float* inp, const float* weight, int64_t N, int C) {
  rmsnorm_backward_dot_impl(dot, dout, inp, weight, N, C);
}
void rmsnorm_backward_dot(float* dot, const bf16* dout, const bf16* inp, const bf16* weight, int64_t N, int C) {
  rmsnorm_backward_dot_impl(dot, dout, inp, weight, N, C);
}
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total) {
  rmsnorm_backward_impl(dinp, dweight, dout, inp, weight, rstd, dot, N, C, C_total);
}
void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const bf16* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total) {
  rmsnorm_backward_impl(dinp, dweight, dout, inp, weight, rstd, dot, N, C, C_total);
}
void rope_forward(float* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(x, cos, sin, B, T, heads, HS, stride, 1.0f);
}
void rope_forward(bf16* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(x, cos, sin, B, T, heads, HS, stride, 1.0f);
}
void rope_backward(float* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(dx, cos, sin, B, T, heads, HS, stride, -1.0f);
}
void rope_backward(bf16* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  rope_rotate(dx, cos, sin, B, T, heads, HS, stride, -1.0f);
}
void swiglu_forward(float* out, const float* inp, int64_t N, int F) { swiglu_forward_impl(out, inp, N, F); }
void swiglu_forward(bf16* out, const bf16* inp, int64_t N, int F) { swiglu_forward_impl(out, inp, N, F); }
void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N, int F) {
  swiglu_backward_impl(dinp, inp, dout, N, F);
}
void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N, int F) {
  swiglu_backward_impl(dinp, inp, dout, N, F);
}

namespace {
template <class E>
void repeat_kv_forward_impl(E* out, const E* inp, int64_t N, int NH, int NKV, int HS) {
  // out [N, 3 NH HS], inp [N, (NH + 2 NKV) HS]: whole heads copied
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
  const size_t head = sizeof(E) * static_cast<size_t>(HS);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++) {
    const E* in = inp + n * (Q + 2 * K);
    E* o = out + n * 3 * Q;
    std::memcpy(o, in, sizeof(E) * static_cast<size_t>(Q));
    for (int h = 0; h < NH; h++) {
      std::memcpy(o + Q + h * HS, in + Q + (h / G) * HS, head);
      std::memcpy(o + 2 * Q + h * HS, in + Q + K + (h / G) * HS, head);
    }
  }
}

template <class E>
void repeat_kv_backward_impl(E* dinp, const E* dout, int64_t N, int NH, int NKV, int HS) {
  // dinp [N, (NH + 2 NKV) HS], dout [N, 3 NH HS]; the copies of a KV head added in head order (in fp32:
  // for bf16 each row is rounded once, after all of its copies)
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
#pragma omp parallel
  {
    RowView<E> dinp_row(Q + 2 * K), dout_row(3 * Q);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      float* d = dinp_row.update(dinp + n * (Q + 2 * K), Q + 2 * K);
      const float* o = dout_row.read(dout + n * 3 * Q, 3 * Q);
#pragma omp simd
      for (int i = 0; i < Q; i++) d[i] += o[i];
      for (int h = 0; h < NH; h++) {
        float* dk = d + Q + (h / G) * HS;
        float* dv = d + Q + K + (h / G) * HS;
        const float* ok = o + Q + h * HS;
        const float* ov = o + 2 * Q + h * HS;
#pragma omp simd
        for (int i = 0; i < HS; i++) {
          dk[i] += ok[i];
          dv[i] += ov[i];
        }
      }
      dinp_row.commit(dinp + n * (Q + 2 * K), Q + 2 * K);
    }
  }
}
}  // namespace

void repeat_kv_forward(float* out, const float* inp, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_forward_impl(out, inp, N, NH, NKV, HS);
}
void repeat_kv_forward(bf16* out, const bf16* inp, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_forward_impl(out, inp, N, NH, NKV, HS);
}
void repeat_kv_backward(float* dinp, const float* dout, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_backward_impl(dinp, dout, N, NH, NKV, HS);
}
void repeat_kv_backward(bf16* dinp, const bf16* dout, int64_t N, int NH, int NKV, int HS) {
  repeat_kv_backward_impl(dinp, dout, N, NH, NKV, HS);
}

void kv_cache_append(float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS) {
  // kcache, vcache [B, Tc, NKV HS]; qkv [B n, (NH + 2 NKV) HS]: each row's k and v copied whole
  const int Q = NH * HS, K = NKV * HS;
  const size_t bytes = sizeof(float) * static_cast<size_t>(K);
#pragma omp parallel for schedule(static) collapse(2)
  for (int b = 0; b < B; b++)
    for (int i = 0; i < n; i++) {
      const float* row = qkv + ((int64_t)b * n + i) * (Q + 2 * K);
      std::memcpy(kcache + ((int64_t)b * Tc + pos + i) * K, row + Q, bytes);
      std::memcpy(vcache + ((int64_t)b * Tc + pos + i) * K, row + Q + K, bytes);
    }
}

void attention_cached_forward(float* out, const float* qkv, const float* kcache, const float* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS) {
  // out [B n, NH HS]; qkv [B n, (NH + 2 NKV) HS]; kcache, vcache [B, Tc, NKV HS]. One (b, h, i) per
  // task: scores against the cache's keys, softmax, then the weighted sum of its values (decode has
  // n = 1: a matrix-vector product per head, too small for a GEMM to pay).
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
  const float scale = 1.0f / std::sqrt((float)HS);
#pragma omp parallel
  {
    std::vector<float> a(static_cast<size_t>(Tc));
#pragma omp for schedule(static) collapse(3)
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int i = 0; i < n; i++) {
          const int t = pos + i;  // the query's position: it sees the cache's positions [0, t]
          const float* q = qkv + ((int64_t)b * n + i) * (Q + 2 * K) + h * HS;
          const float* kc = kcache + (int64_t)b * Tc * K + (h / G) * HS;
          const float* vc = vcache + (int64_t)b * Tc * K + (h / G) * HS;
          float maxv = -1e30f;
          for (int t2 = 0; t2 <= t; t2++) {
            const float* k = kc + (int64_t)t2 * K;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int j = 0; j < HS; j++) dot += q[j] * k[j];
            a[t2] = dot * scale;
            maxv = std::max(maxv, a[t2]);
          }
          float sum = 0.0f;
          for (int t2 = 0; t2 <= t; t2++) {
            a[t2] = std::exp(a[t2] - maxv);
            sum += a[t2];
          }
          const float inv = 1.0f / sum;
          float* o = out + ((int64_t)b * n + i) * Q + h * HS;
          for (int j = 0; j < HS; j++) o[j] = 0.0f;
          for (int t2 = 0; t2 <= t; t2++) {
            const float* v = vc + (int64_t)t2 * K;
            const float w = a[t2] * inv;
#pragma omp simd
            for (int j = 0; j < HS; j++) o[j] += w * v[j];
          }
        }
  }
}

}  // namespace axonn::kernels::cpu
