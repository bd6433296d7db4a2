// tests/unit/cuda_emu/emulated_ops.hpp — the CUDA tables' kernels that the SIMT emulator runs, as op tables: each
// op launched as its .cu file launches it (the same grid, block and 16-byte-pack decision), put in place of the
// reference table's op in a copy of it (Emulated<E>::table). The kernel tests compare them op by op with
// kernels::ref (test_emu_row_kernels.cpp); the model test runs a whole model on them (test_emu_model.cpp). Covers
// the norms (LayerNorm, RMSNorm and their parameter gradients), the cross-entropy's steps and its one pass, AdamW,
// SwiGLU and RoPE, generation's KV-cache append and attention over the cache, and in bf16 the register-resident
// tensor-core flash attention where it applies (MmaAttention); the rest of a table (GEMMs, fp32 attention, GELU, residuals, embeddings) stays the reference's.
// Include it first: it makes the kernel sources build for the emulator.
#pragma once

#define AXONN_SIMT_EMULATOR 1
#include "simt_emulator.hpp"
//
#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/attention_bf16_mma.cuh"
#include "kernels/cuda/crossentropy_rows.cuh"
#include "kernels/cuda/kv_cache.cuh"
#include "kernels/cuda/llama_rows.cuh"
#include "kernels/cuda/norm_rows.cuh"

#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::test::emulated {

namespace k = axonn::kernels;
namespace cuda = axonn::kernels::cuda;
namespace emu = axonn::emu;
namespace norm = cuda::norm_rows;
namespace ce = cuda::crossentropy_rows;
namespace llama = cuda::llama_rows;
namespace kv = cuda::kv_cache;
using cuda::detail::rows_aligned16;

// The warp order every launch runs under (the kernel tests run both).
inline emu::Schedule& schedule() {
  static emu::Schedule s = emu::Schedule::kLowestFirst;
  return s;
}

template <typename F>
void launch(dim3 grid, dim3 block, F kernel, size_t shared_bytes = 0) {
  emu::launch(grid, block, shared_bytes, kernel, schedule());
}

// columns.cuh's sums down the rows, launched as its column_sums_of launches them.
template <int kSums, typename Terms>
void column_sums(cuda::detail::ColumnOutputs<kSums> out, Terms terms, int64_t rows, int cols, bool vec) {
  if (rows == 0 || cols == 0) return;
  const cuda::detail::ColumnLaunch l = cuda::detail::column_launch(rows, cols);
  launch(l.grid, l.block, [&] {
    cuda::detail::column_sums_kernel<kSums, Terms>(out, terms, rows, cols, l.rows_per_block, vec);
  });
}

// The CUDA table's ops on the emulator, launched as layernorm.cu, llama.cu, crossentropy.cu, adamw.cu and
// kv_cache.cu launch them.
template <typename E>
struct Emulated {
  static void layernorm_sum(float* mean, const E* inp, int64_t N, int C) {
    if (N == 0) return;
    launch(norm::row_blocks(N), norm::kThreads,
           [&] { norm::row_sum_kernel<E, false>(mean, inp, N, C, rows_aligned16<E>(C, {inp})); });
  }
  static void layernorm_centred_sumsq(float* var, float* mean, const E* inp, int64_t N, int C, int C_total) {
    if (N == 0) return;
    launch(norm::row_blocks(N), norm::kThreads, [&] {
      norm::layernorm_centred_squares_kernel<E>(var, mean, inp, N, C, static_cast<float>(C_total),
                                                rows_aligned16<E>(C, {inp}));
    });
  }
  static void layernorm_forward(E* out, const float* mean, float* rstd, const E* inp, const E* weight, const E* bias,
                                int64_t N, int C, int C_total) {
    if (N == 0) return;
    launch(norm::row_blocks(N), norm::kThreads, [&] {
      norm::layernorm_normalise_kernel<E>(out, mean, rstd, inp, weight, bias, N, C, static_cast<float>(C_total),
                                          rows_aligned16<E>(C, {out, inp, weight, bias}));
    });
  }
  static void layernorm_backward_sums(float* sums, const E* dout, const E* inp, const E* weight, const float* mean,
                                      const float* rstd, int64_t N, int C) {
    if (N == 0) return;
    launch(norm::row_blocks(N), norm::kThreads, [&] {
      norm::layernorm_backward_sums_kernel<E>(sums, dout, inp, weight, mean, rstd, N, C,
                                              rows_aligned16<E>(C, {dout, inp, weight}));
    });
  }
  static void layernorm_backward(E* dinp, float* dweight, float* dbias, const E* dout, const E* inp, const E* weight,
                                 const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                                 int C_total) {
    if (N == 0 || C == 0) return;
    launch(norm::row_blocks(N), norm::kThreads, [&] {
      norm::layernorm_backward_apply_kernel<E>(dinp, sums, dout, inp, weight, mean, rstd, N, C,
                                               static_cast<float>(C_total),
                                               rows_aligned16<E>(C, {dinp, dout, inp, weight}));
    });
    column_sums<2>({{dweight, dbias}}, cuda::detail::LayerNormParamTerms<E>{dout, inp, mean, rstd, C}, N, C,
                   rows_aligned16<E>(C, {dout, inp}));
  }

  static void rmsnorm_sumsq(float* sumsq, const E* inp, int64_t N, int C) {
    if (N == 0) return;
    launch(norm::row_blocks(N), norm::kThreads,
           [&] { norm::row_sum_kernel<E, true>(sumsq, inp, N, C, rows_aligned16<E>(C, {inp})); });
  }
  static void rmsnorm_forward(E* out, float* rstd, const E* inp, const E* weight, int64_t N, int C, int C_total,
                              float eps) {
    if (N == 0) return;
    launch(norm::row_blocks(N), norm::kThreads, [&] {
      norm::rmsnorm_forward_kernel<E>(out, rstd, inp, weight, N, C, static_cast<float>(C_total), eps,
                                      rows_aligned16<E>(C, {out, inp, weight}));
    });
  }
  static void rmsnorm_backward_dot(float* dot, const E* dout, const E* inp, const E* weight, int64_t N, int C) {
    if (N == 0) return;
    launch(norm::row_blocks(N), norm::kThreads, [&] {
      norm::rmsnorm_dot_kernel<E>(dot, dout, inp, weight, N, C, rows_aligned16<E>(C, {dout, inp, weight}));
    });
  }
  static void rmsnorm_backward(E* dinp, float* dweight, const E* dout, const E* inp, const E* weight,
                               const float* rstd, const float* dot, int64_t N, int C, int C_total) {
    if (N == 0 || C == 0) return;
    launch(norm::row_blocks(N), norm::kThreads, [&] {
      norm::rmsnorm_input_grad_kernel<E>(dinp, dout, inp, weight, rstd, dot, N, C, static_cast<float>(C_total),
                                         rows_aligned16<E>(C, {dinp, dout, inp, weight}));
    });
    column_sums<1>({{dweight}}, cuda::detail::RmsNormWeightTerms<E>{dout, inp, rstd, C}, N, C,
                   rows_aligned16<E>(C, {dout, inp}));
  }

  static void crossentropy_max(float* maxv, const E* logits, int64_t N, int Vvalid, int Vs) {
    if (N == 0) return;
    launch(ce::row_blocks(N), ce::kThreads,
           [&] { ce::row_max_kernel<E>(maxv, logits, Vvalid, Vs, rows_aligned16<E>(Vs, {logits})); });
  }
  static void crossentropy_sums(float* sums, const float* maxv, const E* logits, const int* targets, int64_t N,
                                int Vvalid, int Vs, int vocab_begin) {
    if (N == 0) return;
    launch(ce::row_blocks(N), ce::kThreads, [&] {
      ce::exp_sum_kernel<E>(sums, maxv, logits, targets, N, Vvalid, Vs, vocab_begin, rows_aligned16<E>(Vs, {logits}));
    });
  }
  static void softmax_crossentropy_forward(float* losses, E* probs, const E* logits, const float* maxv,
                                           const float* sums, int64_t N, int Vvalid, int Vs) {
    if (N == 0) return;
    launch(ce::row_blocks(N), ce::kThreads, [&] {
      ce::probs_loss_kernel<E>(losses, probs, logits, maxv, sums, N, Vvalid, Vs,
                               rows_aligned16<E>(Vs, {probs, logits}));
    });
  }
  static void softmax_crossentropy_backward(E* dlogits, const E* probs, const int* targets, const float* weights,
                                            float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
    if (N == 0) return;
    launch(ce::row_blocks(N), ce::kThreads, [&] {
      ce::softmax_crossentropy_backward_kernel<E>(dlogits, probs, targets, weights, dloss, Vvalid, Vs, vocab_begin,
                                                  rows_aligned16<E>(Vs, {dlogits, probs}));
    });
  }

  static void softmax_crossentropy_forward_backward(float* losses, E* dlogits, const E* logits, const float* maxv,
                                                    const float* sums, const int* targets, const float* weights,
                                                    float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
    if (N == 0) return;
    launch(ce::row_blocks(N), ce::kThreads, [&] {
      ce::probs_loss_gradient_kernel<E>(losses, dlogits, logits, maxv, sums, targets, weights, dloss, N, Vvalid, Vs,
                                        vocab_begin, rows_aligned16<E>(Vs, {dlogits, logits}));
    });
  }

  static void adamw_update(float* master, E* copy, float* m, float* v, const float* grads, int64_t n, float lr,
                           float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
    if (n == 0) return;
    const cuda::adamw::Packs update{master, reinterpret_cast<uint16_t*>(copy),  // copy: null in the fp32 table
                                    m, v, grads,
                                    cuda::adamw::step_of(lr, beta1, beta2, eps, weight_decay, grad_scale, t)};
    launch(cuda::detail::pack_grid(n), cuda::detail::kPackThreads,
           [&] { cuda::detail::pack_kernel(update, n, update.aligned()); });
  }

  static void swiglu_forward(E* out, const E* inp, int64_t N, int F) {
    if (N == 0 || F == 0) return;
    launch(cuda::detail::row_grid(N), llama::kThreads,
           [&] { llama::swiglu_forward_kernel<E>(out, inp, N, F, rows_aligned16<E>(F, {out, inp})); });
  }
  static void swiglu_backward(E* dinp, const E* inp, const E* dout, int64_t N, int F) {
    if (N == 0 || F == 0) return;
    launch(cuda::detail::row_grid(N), llama::kThreads, [&] {
      llama::swiglu_backward_kernel<E>(dinp, inp, dout, N, F, rows_aligned16<E>(F, {dinp, inp, dout}));
    });
  }
  static void rope(E* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride, float sign) {
    const int64_t rows = static_cast<int64_t>(B) * T;
    if (rows == 0 || heads == 0 || HS == 0) return;
    launch(cuda::detail::row_grid(rows), llama::kThreads, [&] {
      llama::rope_kernel<E>(x, cos, sin, rows, T, heads, HS, stride, sign, llama::rope_aligned(x, cos, sin, HS, stride));
    });
  }
  static void rope_forward(E* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
    rope(x, cos, sin, B, T, heads, HS, stride, 1.0f);
  }
  static void rope_backward(E* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
    rope(dx, cos, sin, B, T, heads, HS, stride, -1.0f);
  }

  static void kv_cache_append(E* kcache, E* vcache, const E* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                              int HS) {
    const int64_t elements = static_cast<int64_t>(B) * n * NKV * HS;
    if (elements == 0) return;
    launch(cuda::detail::grid_for(elements, kv::kAppendThreads), kv::kAppendThreads, [&] {
      kv::kv_cache_append_kernel<E>(kcache, vcache, qkv, n, pos, Tc, NH * HS, NKV * HS, elements);
    });
  }
  static void attention_cached_forward(E* out, const E* qkv, const E* kcache, const E* vcache, int B, int n, int pos,
                                       int Tc, int NH, int NKV, int HS) {
    const int64_t blocks = static_cast<int64_t>(B) * NH * n;
    if (blocks == 0) return;
    launch(
        dim3(static_cast<unsigned>(blocks)), kv::kCachedAttentionThreads,
        [&] {
          kv::attention_cached_kernel<E>(out, qkv, kcache, vcache, n, pos, Tc, NH, NH / NKV, HS,
                                         1.0f / std::sqrt(static_cast<float>(HS)));
        },
        kv::attention_cached_smem(Tc, HS));
  }

  // The reference table with these ops in place of its own.
  static k::OpTable<E> table(const k::OpTable<E>& ref) {
    k::OpTable<E> t = ref;
    t.layernorm_sum = layernorm_sum;
    t.layernorm_centred_sumsq = layernorm_centred_sumsq;
    t.layernorm_forward = layernorm_forward;
    t.layernorm_backward_sums = layernorm_backward_sums;
    t.layernorm_backward = layernorm_backward;
    t.rmsnorm_sumsq = rmsnorm_sumsq;
    t.rmsnorm_forward = rmsnorm_forward;
    t.rmsnorm_backward_dot = rmsnorm_backward_dot;
    t.rmsnorm_backward = rmsnorm_backward;
    t.crossentropy_max = crossentropy_max;
    t.crossentropy_sums = crossentropy_sums;
    t.softmax_crossentropy_forward = softmax_crossentropy_forward;
    t.softmax_crossentropy_backward = softmax_crossentropy_backward;
    t.softmax_crossentropy_forward_backward = softmax_crossentropy_forward_backward;
    t.adamw_update = adamw_update;
    t.swiglu_forward = swiglu_forward;
    t.swiglu_backward = swiglu_backward;
    t.rope_forward = rope_forward;
    t.rope_backward = rope_backward;
    t.kv_cache_append = kv_cache_append;
    t.attention_cached_forward = attention_cached_forward;
    return t;
  }
};

// bf16: the flash attention on register-resident tensor-core fragments (attention_bf16_mma.cuh, what
// AXONN_FLASH_ATTENTION=mma runs), launched as attention_bf16_tc.cu launches it, where it applies (head size 64
// or 128, the bf16 buffers 16-byte aligned); elsewhere the reference table's (`fallback`), as the CUDA table
// falls back to its CUDA-core kernels. The backward's D = rowsum(dout * out) per (b, h, t), fp32 from the bf16
// values, is summed here on the host (on the GPU a warp per row sums it, flash_rowdot_kernel, in another order).
struct MmaAttention {
  static const k::OpsBf16*& fallback() {
    static const k::OpsBf16* table = nullptr;
    return table;
  }
  static bool applies(int HS, std::initializer_list<const void*> buffers) {
    return (HS == 64 || HS == 128) && cuda::detail::all_aligned16(buffers);
  }
  template <int HS>
  static void forward_hs(k::bf16* out, float* lse, const k::bf16* qkv, int B, int T, int C, int NH) {
    namespace fa = k::cuda_bf16::mma_attention;
    const float scale_log2 = 1.0f / std::sqrt(static_cast<float>(HS)) * fa::kLog2e;
    launch(fa::grid_of(B, T, NH), dim3(fa::kThreads),
           [&] { fa::forward_kernel<HS>(out, lse, qkv, T, C, NH, scale_log2); }, fa::Layout<HS>::kForward);
  }
  template <int HS>
  static void backward_hs(k::bf16* dqkv, const float* D, const k::bf16* dout, const k::bf16* qkv, const float* lse,
                          int B, int T, int C, int NH) {
    namespace fa = k::cuda_bf16::mma_attention;
    const float scale = 1.0f / std::sqrt(static_cast<float>(HS)), scale_log2 = scale * fa::kLog2e;
    const dim3 grid = fa::grid_of(B, T, NH), block(fa::kThreads);
    launch(grid, block, [&] { fa::backward_dq_kernel<HS>(dqkv, D, dout, qkv, lse, T, C, NH, scale, scale_log2); },
           fa::Layout<HS>::kBackward);
    launch(grid, block, [&] { fa::backward_dkv_kernel<HS>(dqkv, D, dout, qkv, lse, T, C, NH, scale, scale_log2); },
           fa::Layout<HS>::kBackward);
  }
  static void attention_forward(k::bf16* out, float* lse, const k::bf16* qkv, int B, int T, int C, int NH) {
    const int HS = C / NH;
    if (B == 0 || T == 0) return;
    if (!applies(HS, {out, qkv})) return fallback()->attention_forward(out, lse, qkv, B, T, C, NH);
    if (HS == 64)
      forward_hs<64>(out, lse, qkv, B, T, C, NH);
    else
      forward_hs<128>(out, lse, qkv, B, T, C, NH);
  }
  static void attention_backward(k::bf16* dqkv, float* scratch, const k::bf16* dout, const k::bf16* qkv,
                                 const k::bf16* out, const float* lse, int B, int T, int C, int NH) {
    const int HS = C / NH;
    if (B == 0 || T == 0) return;
    if (!applies(HS, {dqkv, dout, qkv}))
      return fallback()->attention_backward(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH);
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
          const int64_t base = (static_cast<int64_t>(b) * T + t) * C + static_cast<int64_t>(h) * HS;
          float s = 0.0f;
          for (int d = 0; d < HS; d++) s += bf16_to_f32(dout[base + d]) * bf16_to_f32(out[base + d]);
          scratch[(static_cast<int64_t>(b) * NH + h) * T + t] = s;
        }
    if (HS == 64)
      backward_hs<64>(dqkv, scratch, dout, qkv, lse, B, T, C, NH);
    else
      backward_hs<128>(dqkv, scratch, dout, qkv, lse, B, T, C, NH);
  }
  // `ref` (ref_bf16_ops() or a table made from it) with this attention in place of its own
  static k::OpsBf16 table(const k::OpsBf16& ref) {
    fallback() = &k::ref_bf16_ops();
    k::OpsBf16 t = ref;
    t.attention_forward = attention_forward;
    t.attention_backward = attention_backward;
    return t;
  }
};

}  // namespace axonn::test::emulated
