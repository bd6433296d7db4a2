// kernels/cpu/adamw.cpp — AdamW on the fp32 masters (writing the bf16 copies in the same pass), the gradients' sum of squares, the casts.
#include "row_ops.hpp"

namespace axonn::kernels::cpu {

using namespace detail;  // NOLINT: the shared row helpers (row_ops.hpp)

namespace {
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

void sum_squares(double* sums, const float* const* tensors, const int64_t* sizes, int count) {
  for (int k = 0; k < count; k++) {
    const float* x = tensors[k];
    const int64_t n = sizes[k];
    double s = 0.0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    sums[k] = s;
  }
}

}  // namespace axonn::kernels::cpu
