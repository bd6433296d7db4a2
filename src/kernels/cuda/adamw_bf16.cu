// kernels/cuda/adamw_bf16.cu — AdamW on the fp32 master weights with the bf16 copy written in the same
// pass (the fp32 table's kernel, detail::adamw_launch), and the fp32 <-> bf16 casts.
#include "bf16.cuh"

namespace axonn::kernels::cuda_bf16 {
namespace {

using detail::kPack;

struct CastToBf16 {
  uint16_t* out;
  const float* in;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack];
    if (vec) {
      const float4 a = *reinterpret_cast<const float4*>(in + i), b = *reinterpret_cast<const float4*>(in + i + 4);
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    } else {
#pragma unroll
      for (int j = 0; j < kPack; j++) x[j] = j < cnt ? in[i + j] : 0.0f;
    }
    detail::store8(out + i, x, cnt, vec);
  }
};

struct CastToF32 {
  float* out;
  const uint16_t* in;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack];
    detail::load8(x, in + i, cnt, vec);
    if (vec) {
      *reinterpret_cast<float4*>(out + i) = make_float4(x[0], x[1], x[2], x[3]);
      *reinterpret_cast<float4*>(out + i + 4) = make_float4(x[4], x[5], x[6], x[7]);
    } else {
#pragma unroll
      for (int j = 0; j < kPack; j++)
        if (j < cnt) out[i + j] = x[j];
    }
  }
};

}  // namespace

void adamw_update(float* master, bf16* params, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  // master, m, v, grads [n] fp32; params [n] bf16; t >= 1
  if (n == 0) return;
  AXONN_CHECK_ARG(t >= 1, "cuda bf16 adamw_update: step t = ", t,
                  " must be >= 1 (the bias corrections divide by 1 - beta^t)");
  // The fp32 table's pass on the master weights, writing the bf16 copy as it goes.
  kernels::cuda::detail::adamw_launch(master, params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay,
                                      grad_scale, t);
}

void cast_to_bf16(bf16* out, const float* in, int64_t n) {
  // out [n] bf16, in [n] fp32
  detail::launch_packs(CastToBf16{out, in}, n, detail::all_aligned16({out, in}));
}

void cast_to_f32(float* out, const bf16* in, int64_t n) {
  // out [n] fp32, in [n] bf16
  detail::launch_packs(CastToF32{out, in}, n, detail::all_aligned16({out, in}));
}

}  // namespace axonn::kernels::cuda_bf16
