// kernels/cuda/adamw.cuh — the fused AdamW update's device code (adamw.cu launches it): a thread takes packs of 8
// elements (packs.cuh: two 16-byte loads of each fp32 array, one 16-byte store of the bf16 copy, where every
// array is aligned), where one element a thread moved 4 bytes per load and left the update at about half the
// memory's speed. The arithmetic of each element is kernels::ref's, in the same order. Builds for the SIMT
// emulator as well (tests/unit/cuda_emu runs it on the CPU against kernels::ref).
#pragma once

#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "packs.cuh"

namespace axonn::kernels::cuda::adamw {

// One step's settings, the bias corrections c1 = 1 - beta1^t, c2 = 1 - beta2^t computed once on the host, in
// float as kernels::ref does.
struct Step {
  float lr, beta1, beta2, eps, weight_decay, grad_scale, c1, c2;
};
// Step t >= 1's settings.
inline Step step_of(float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  return {lr,         beta1, beta2, eps, weight_decay, grad_scale, 1.0f - std::pow(beta1, static_cast<float>(t)),
          1.0f - std::pow(beta2, static_cast<float>(t))};
}

// The update of elements [i, i + cnt): m, v and the fp32 master in place; with a copy (the bf16 table's), the
// master's bf16 rounding as well. The operator detail::pack_kernel calls.
struct Packs {
  float* params;
  uint16_t* copy;  // null in the fp32 table
  float* m;
  float* v;
  const float* grads;
  Step s;
  // Every array is 16-byte aligned: the 16-byte loads and stores apply (pack_kernel's `vec`).
  bool aligned() const {
    return detail::all_aligned16({params, m, v, grads}) && (copy == nullptr || detail::all_aligned16({copy}));
  }
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float g[detail::kPack], mi[detail::kPack], vi[detail::kPack], p[detail::kPack];
    detail::load8(g, grads + i, cnt, vec);
    detail::load8(mi, m + i, cnt, vec);
    detail::load8(vi, v + i, cnt, vec);
    detail::load8(p, params + i, cnt, vec);
#pragma unroll
    for (int j = 0; j < detail::kPack; j++) {
      const float gj = g[j] * s.grad_scale;
      mi[j] = s.beta1 * mi[j] + (1.0f - s.beta1) * gj;
      vi[j] = s.beta2 * vi[j] + (1.0f - s.beta2) * gj * gj;
      const float mh = mi[j] / s.c1, vh = vi[j] / s.c2;
      p[j] -= s.lr * (mh / (sqrtf(vh) + s.eps) + s.weight_decay * p[j]);
    }
    detail::store8(m + i, mi, cnt, vec);
    detail::store8(v + i, vi, cnt, vec);
    detail::store8(params + i, p, cnt, vec);
    if (copy != nullptr) detail::store8(copy + i, p, cnt, vec);
  }
};

}  // namespace axonn::kernels::cuda::adamw
