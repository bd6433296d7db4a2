// kernels/cuda/elementwise.cu — GELU (tanh approximation) and the residual add, for both tables from the same
// templates over the storage type: packs of 8 (16-byte loads and stores when every pointer is 16-byte
// aligned, packs.cuh), fp32 math, a bf16 output rounded once.
#include "axonn/kernels/ops.hpp"
#include "packs.cuh"

namespace axonn::kernels::cuda {
namespace {

using detail::kPack;
using detail::load8;
using detail::store8;

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

template <typename E>
struct GeluForward {
  E* out;
  const E* inp;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack], y[kPack];
    load8(x, inp + i, cnt, vec);
#pragma unroll
    for (int j = 0; j < kPack; j++) {
      const float cube = 0.044715f * x[j] * x[j] * x[j];
      y[j] = 0.5f * x[j] * (1.0f + tanhf(kGeluScale * (x[j] + cube)));
    }
    store8(out + i, y, cnt, vec);
  }
};

template <typename E>
struct GeluBackward {  // dinp += gelu'(inp) * dout, the sum in fp32
  E* dinp;
  const E* inp;
  const E* dout;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack], dy[kPack], dx[kPack];
    load8(x, inp + i, cnt, vec);
    load8(dy, dout + i, cnt, vec);
    load8(dx, dinp + i, cnt, vec);
#pragma unroll
    for (int j = 0; j < kPack; j++) {
      const float cube = 0.044715f * x[j] * x[j] * x[j];
      const float th = tanhf(kGeluScale * (x[j] + cube));
      const float sech2 = 1.0f - th * th;
      const float local =
          0.5f * (1.0f + th) + x[j] * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x[j] * x[j]);
      dx[j] += local * dy[j];
    }
    store8(dinp + i, dx, cnt, vec);
  }
};

template <typename E>
struct ResidualForward {
  E* out;
  const E* a;
  const E* b;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack], y[kPack];
    load8(x, a + i, cnt, vec);
    load8(y, b + i, cnt, vec);
#pragma unroll
    for (int j = 0; j < kPack; j++) x[j] += y[j];
    store8(out + i, x, cnt, vec);
  }
};

template <typename E>
struct ResidualBackward {  // da += dout; db += dout
  E* da;
  E* db;
  const E* dout;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float d[kPack], x[kPack], y[kPack];
    load8(d, dout + i, cnt, vec);
    load8(x, da + i, cnt, vec);
    load8(y, db + i, cnt, vec);
#pragma unroll
    for (int j = 0; j < kPack; j++) {
      x[j] += d[j];
      y[j] += d[j];
    }
    store8(da + i, x, cnt, vec);
    store8(db + i, y, cnt, vec);
  }
};

// --- launches, one set for each element type -------------------------------------------------

template <typename E>
void gelu_forward_of(E* out, const E* inp, int64_t N) {
  // out [N], inp [N]
  detail::launch_packs(GeluForward<E>{out, inp}, N, detail::all_aligned16({out, inp}));
}
template <typename E>
void gelu_backward_of(E* dinp, const E* inp, const E* dout, int64_t N) {
  // dinp [N] (added to), inp [N], dout [N]
  detail::launch_packs(GeluBackward<E>{dinp, inp, dout}, N, detail::all_aligned16({dinp, inp, dout}));
}
template <typename E>
void residual_forward_of(E* out, const E* a, const E* b, int64_t N) {
  // out [N], a [N], b [N]
  detail::launch_packs(ResidualForward<E>{out, a, b}, N, detail::all_aligned16({out, a, b}));
}
template <typename E>
void residual_backward_of(E* da, E* db, const E* dout, int64_t N) {
  // da [N], db [N] (both added to), dout [N]
  detail::launch_packs(ResidualBackward<E>{da, db, dout}, N, detail::all_aligned16({da, db, dout}));
}

}  // namespace

void gelu_forward(float* out, const float* inp, int64_t N) { gelu_forward_of(out, inp, N); }
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  gelu_backward_of(dinp, inp, dout, N);
}
void residual_forward(float* out, const float* a, const float* b, int64_t N) { residual_forward_of(out, a, b, N); }
void residual_backward(float* da, float* db, const float* dout, int64_t N) { residual_backward_of(da, db, dout, N); }

}  // namespace axonn::kernels::cuda

// bf16 (kernels/ops_bf16.hpp)
namespace axonn::kernels::cuda_bf16 {

void gelu_forward(bf16* out, const bf16* inp, int64_t N) { cuda::gelu_forward_of(out, inp, N); }
void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N) {
  cuda::gelu_backward_of(dinp, inp, dout, N);
}
void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t N) { cuda::residual_forward_of(out, a, b, N); }
void residual_backward(bf16* da, bf16* db, const bf16* dout, int64_t N) {
  cuda::residual_backward_of(da, db, dout, N);
}

}  // namespace axonn::kernels::cuda_bf16
