// kernels/cpu/row_ops.hpp (private to the CPU kernels) — what the files of the fast CPU kernels share.
//
// The fast CPU implementations: GEMMs through the GEMM backend (gemm.hpp), the
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
//
// One file per op family, as kernels/cuda/ has: embedding.cpp, layernorm.cpp, matmul.cpp, attention.cpp
// (training's, and inference's over the KV cache), elementwise.cpp (GELU, residual), crossentropy.cpp,
// adamw.cpp (with the gradient norm and the casts), llama.cpp (RMSNorm, RoPE, SwiGLU, KV repetition); the
// bf16 GEMMs and row lookups in ops_cpu_bf16.cpp.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"

namespace axonn::kernels::cpu::detail {

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

}  // namespace axonn::kernels::cpu::detail
