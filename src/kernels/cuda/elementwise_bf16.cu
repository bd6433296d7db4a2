// kernels/cuda/elementwise_bf16.cu — GELU and the residual add in bf16: packs of 8 (16-byte loads and
// stores when every pointer is 16-byte aligned), fp32 math, each output rounded once.
#include "bf16.cuh"

namespace axonn::kernels::cuda_bf16 {
namespace {

using detail::kPack;
using detail::load8;
using detail::store8;

constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)

struct GeluForward {
  uint16_t* out;
  const uint16_t* inp;
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

struct GeluBackward {  // dinp += gelu'(inp) * dout, the sum in fp32
  uint16_t* dinp;
  const uint16_t* inp;
  const uint16_t* dout;
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

struct ResidualForward {
  uint16_t* out;
  const uint16_t* a;
  const uint16_t* b;
  __device__ void operator()(int64_t i, int cnt, bool vec) const {
    float x[kPack], y[kPack];
    load8(x, a + i, cnt, vec);
    load8(y, b + i, cnt, vec);
#pragma unroll
    for (int j = 0; j < kPack; j++) x[j] += y[j];
    store8(out + i, x, cnt, vec);
  }
};

struct ResidualBackward {  // da += dout; db += dout
  uint16_t* da;
  uint16_t* db;
  const uint16_t* dout;
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

}  // namespace

void gelu_forward(bf16* out, const bf16* inp, int64_t N) {
  // out [N], inp [N]
  detail::launch_packs(GeluForward{out, inp}, N, detail::all_aligned16({out, inp}));
}

void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, int64_t N) {
  // dinp [N] (added to), inp [N], dout [N]
  detail::launch_packs(GeluBackward{dinp, inp, dout}, N, detail::all_aligned16({dinp, inp, dout}));
}

void residual_forward(bf16* out, const bf16* a, const bf16* b, int64_t N) {
  // out [N], a [N], b [N]
  detail::launch_packs(ResidualForward{out, a, b}, N, detail::all_aligned16({out, a, b}));
}

void residual_backward(bf16* da, bf16* db, const bf16* dout, int64_t N) {
  // da [N], db [N] (both added to), dout [N]
  detail::launch_packs(ResidualBackward{da, db, dout}, N, detail::all_aligned16({da, db, dout}));
}

}  // namespace axonn::kernels::cuda_bf16
