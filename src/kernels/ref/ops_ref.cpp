// kernels/ref — naive implementations of the op list: plain loops, one thread, no BLAS.
// They follow llm.c's train_gpt2.c formulas and are the oracle the fast kernels are tested against.
#include <cmath>
#include <cstring>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/kernels/ops.hpp"

namespace axonn::kernels::ref {

namespace {
constexpr float kLayerNormEps = 1e-5f;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
}  // namespace

void embedding_forward(float* out, const int* inp, const float* wte, int row_begin, int R, int64_t N, int C) {
  // out [N,C], inp [N], wte [R,C] holding vocabulary rows [row_begin, row_begin + R)
  for (int64_t n = 0; n < N; n++) {
    int r = inp[n] - row_begin;
    for (int i = 0; i < C; i++) out[n * C + i] = (r >= 0 && r < R) ? wte[(int64_t)r * C + i] : 0.0f;
  }
}

void embedding_backward(float* dwte, const float* dout, const int* inp, int row_begin, int R, int64_t N, int C) {
  // dwte [R,C], dout [N,C], inp [N]
  for (int64_t n = 0; n < N; n++) {
    int r = inp[n] - row_begin;
    if (r < 0 || r >= R) continue;
    for (int i = 0; i < C; i++) dwte[(int64_t)r * C + i] += dout[n * C + i];
  }
}

void position_forward(float* out, const float* wpe, int B, int T, int C) {
  // out [B,T,C] (added to), wpe [maxT,C]
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int i = 0; i < C; i++) out[((int64_t)b * T + t) * C + i] += wpe[(int64_t)t * C + i];
}

void position_backward(float* dwpe, const float* dout, int B, int T, int C) {
  // dwpe [maxT,C], dout [B,T,C]
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int i = 0; i < C; i++) dwpe[(int64_t)t * C + i] += dout[((int64_t)b * T + t) * C + i];
}

void layernorm_sum(float* mean, const float* inp, int64_t N, int C) {
  // mean [N], inp [N,C]: this rank's row sums
  for (int64_t n = 0; n < N; n++) {
    float m = 0.0f;
    for (int i = 0; i < C; i++) m += inp[n * C + i];
    mean[n] = m;
  }
}

void layernorm_centred_sumsq(float* var, float* mean, const float* inp, int64_t N, int C, int C_total) {
  // var [N], mean [N] (the complete sums in, the means out), inp [N,C]
  for (int64_t n = 0; n < N; n++) {
    mean[n] /= (float)C_total;
    float v = 0.0f;
    for (int i = 0; i < C; i++) v += (inp[n * C + i] - mean[n]) * (inp[n * C + i] - mean[n]);
    var[n] = v;
  }
}

void layernorm_forward(float* out, const float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int C, int C_total) {
  // out [N,C], mean [N], rstd [N] (the complete centred sums of squares in), inp [N,C], weight [C], bias [C]
  for (int64_t n = 0; n < N; n++) {
    rstd[n] = 1.0f / std::sqrt(rstd[n] / (float)C_total + kLayerNormEps);
    for (int i = 0; i < C; i++)
      out[n * C + i] = rstd[n] * (inp[n * C + i] - mean[n]) * weight[i] + bias[i];
  }
}

void layernorm_backward_sums(float* sums, const float* dout, const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t N, int C) {
  // sums [2N]: [N] sum(dnorm) | [N] sum(dnorm * xhat) over this rank's channels
  for (int64_t n = 0; n < N; n++) {
    float s1 = 0.0f, s2 = 0.0f;
    for (int i = 0; i < C; i++) {
      float xhat = (inp[n * C + i] - mean[n]) * rstd[n];
      float dnorm = weight[i] * dout[n * C + i];
      s1 += dnorm;
      s2 += dnorm * xhat;
    }
    sums[n] = s1;
    sums[N + n] = s2;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, const float* sums, int64_t N, int C,
                        int C_total) {
  // dinp [N,C], dweight [C], dbias [C], dout [N,C], inp [N,C], weight [C], mean [N], rstd [N], sums [2N]
  // (complete over all C_total channels)
  for (int64_t n = 0; n < N; n++) {
    float dnorm_mean = sums[n] / (float)C_total, dnorm_norm_mean = sums[N + n] / (float)C_total;
    for (int i = 0; i < C; i++) {
      float xhat = (inp[n * C + i] - mean[n]) * rstd[n];
      float dy = dout[n * C + i];
      float dnorm = weight[i] * dy;
      dbias[i] += dy;
      dweight[i] += xhat * dy;
      dinp[n * C + i] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * rstd[n];
    }
  }
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int C,
                    int OC) {
  // out [N,OC], inp [N,C], weight [OC,C], bias [OC]
  for (int64_t n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      float acc = bias ? bias[o] : 0.0f;
      for (int i = 0; i < C; i++) acc += inp[n * C + i] * weight[(int64_t)o * C + i];
      out[n * OC + o] = acc;
    }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int C, int OC) {
  // dinp [N,C], dweight [OC,C], dbias [OC], dout [N,OC], inp [N,C], weight [OC,C]
  for (int64_t n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      float d = dout[n * OC + o];
      if (dinp)
        for (int i = 0; i < C; i++) dinp[n * C + i] += weight[(int64_t)o * C + i] * d;
      if (dweight)
        for (int i = 0; i < C; i++) dweight[(int64_t)o * C + i] += inp[n * C + i] * d;
      if (dbias) dbias[o] += d;
    }
}

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  // out [B,T,C], att [B,NH,T,T], qkv [B,T,3C]
  int HS = C / NH;
  float scale = 1.0f / std::sqrt((float)HS);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const float* q = qkv + ((int64_t)b * T + t) * 3 * C + h * HS;
        float* a = att + (((int64_t)b * NH + h) * T + t) * T;
        float maxv = -1e30f;
        for (int t2 = 0; t2 <= t; t2++) {
          const float* k = qkv + ((int64_t)b * T + t2) * 3 * C + C + h * HS;
          float dot = 0.0f;
          for (int i = 0; i < HS; i++) dot += q[i] * k[i];
          a[t2] = dot * scale;
          if (a[t2] > maxv) maxv = a[t2];
        }
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          a[t2] = std::exp(a[t2] - maxv);
          sum += a[t2];
        }
        for (int t2 = 0; t2 < T; t2++) a[t2] = t2 <= t ? a[t2] / sum : 0.0f;
        float* o = out + ((int64_t)b * T + t) * C + h * HS;
        for (int i = 0; i < HS; i++) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          const float* v = qkv + ((int64_t)b * T + t2) * 3 * C + 2 * C + h * HS;
          for (int i = 0; i < HS; i++) o[i] += a[t2] * v[i];
        }
      }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* /*out*/,
                        const float* att, int B, int T, int C, int NH) {
  // dqkv [B,T,3C], scratch [B,NH,T,T] (holds d att), dout [B,T,C], qkv [B,T,3C], att [B,NH,T,T]
  int HS = C / NH;
  float scale = 1.0f / std::sqrt((float)HS);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const float* a = att + (((int64_t)b * NH + h) * T + t) * T;
        float* da = scratch + (((int64_t)b * NH + h) * T + t) * T;
        const float* dy = dout + ((int64_t)b * T + t) * C + h * HS;
        // out = att @ v: d att and d v
        for (int t2 = 0; t2 <= t; t2++) {
          const float* v = qkv + ((int64_t)b * T + t2) * 3 * C + 2 * C + h * HS;
          float* dv = dqkv + ((int64_t)b * T + t2) * 3 * C + 2 * C + h * HS;
          float acc = 0.0f;
          for (int i = 0; i < HS; i++) {
            acc += v[i] * dy[i];
            dv[i] += a[t2] * dy[i];
          }
          da[t2] = acc;
        }
        // softmax: d pre = a * (d a - sum(a * d a))
        float dot = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) dot += a[t2] * da[t2];
        const float* q = qkv + ((int64_t)b * T + t) * 3 * C + h * HS;
        float* dq = dqkv + ((int64_t)b * T + t) * 3 * C + h * HS;
        for (int t2 = 0; t2 <= t; t2++) {
          float dpre = a[t2] * (da[t2] - dot) * scale;
          const float* k = qkv + ((int64_t)b * T + t2) * 3 * C + C + h * HS;
          float* dk = dqkv + ((int64_t)b * T + t2) * 3 * C + C + h * HS;
          for (int i = 0; i < HS; i++) {
            dq[i] += k[i] * dpre;
            dk[i] += q[i] * dpre;
          }
        }
      }
}

void gelu_forward(float* out, const float* inp, int64_t N) {
  // out [N], inp [N]
  for (int64_t i = 0; i < N; i++) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    out[i] = 0.5f * x * (1.0f + std::tanh(kGeluScale * (x + cube)));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  // dinp [N], inp [N], dout [N]
  for (int64_t i = 0; i < N; i++) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    float th = std::tanh(kGeluScale * (x + cube));
    float sech2 = 1.0f - th * th;
    float local = 0.5f * (1.0f + th) + x * 0.5f * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += local * dout[i];
  }
}

void residual_forward(float* out, const float* a, const float* b, int64_t N) {
  for (int64_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, int64_t N) {
  for (int64_t i = 0; i < N; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

// The cross-entropy's three row reductions over the vocabulary, each completed over the group by the
// caller: the max (for stability), the sum of exponentials, and the target's logit (0 where not held).
void crossentropy_max(float* maxv, const float* logits, int64_t N, int Vvalid, int Vs) {
  for (int64_t n = 0; n < N; n++) {
    float m = -1e30f;
    for (int i = 0; i < Vvalid; i++) m = logits[n * Vs + i] > m ? logits[n * Vs + i] : m;
    maxv[n] = m;
  }
}

void crossentropy_sums(float* sums, const float* maxv, const float* logits, const int* targets, int64_t N,
                       int Vvalid, int Vs, int vocab_begin) {
  // sums [N] sum exp | [N] target logit
  for (int64_t n = 0; n < N; n++) {
    const float* z = logits + n * Vs;
    int t = targets[n] - vocab_begin;
    float sum = 0.0f;
    for (int i = 0; i < Vvalid; i++) sum += std::exp(z[i] - maxv[n]);
    sums[n] = sum;
    sums[N + n] = (t >= 0 && t < Vvalid) ? z[t] : 0.0f;
  }
}

void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const float* maxv,
                                  const float* sums, int64_t N, int Vvalid, int Vs) {
  // losses [N], probs [N,Vs] (may alias logits: each element is read before it is written), logits [N,Vs]
  for (int64_t n = 0; n < N; n++) {
    const float* z = logits + n * Vs;
    float* p = probs + n * Vs;
    for (int i = 0; i < Vvalid; i++) p[i] = std::exp(z[i] - maxv[n]) / sums[n];
    for (int i = Vvalid; i < Vs; i++) p[i] = 0.0f;
    // -log softmax(target) = log(sum exp) + max - logit(target)
    losses[n] = std::log(sums[n]) + maxv[n] - sums[N + n];
  }
}

void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, const float* weights,
                                   float dloss, int64_t N, int Vvalid, int Vs, int vocab_begin) {
  // dlogits [N,Vs], probs [N,Vs], targets [N], weights [N] or null
  for (int64_t n = 0; n < N; n++) {
    float* dz = dlogits + n * Vs;
    const float* p = probs + n * Vs;
    int t = targets[n] - vocab_begin;
    const float d = weights ? dloss * weights[n] : dloss;
    if (dz == p) {  // in place: overwrite
      for (int i = 0; i < Vvalid; i++) dz[i] = (dz[i] - (i == t ? 1.0f : 0.0f)) * d;
      for (int i = Vvalid; i < Vs; i++) dz[i] = 0.0f;
    } else {
      for (int i = 0; i < Vvalid; i++) dz[i] += (p[i] - (i == t ? 1.0f : 0.0f)) * d;
    }
  }
}

// By its definition (ops.hpp): the forward with the probabilities in dlogits, then the backward in place.
void softmax_crossentropy_forward_backward(float* losses, float* dlogits, const float* logits, const float* maxv,
                                           const float* sums, const int* targets, const float* weights, float dloss,
                                           int64_t N, int Vvalid, int Vs, int vocab_begin) {
  softmax_crossentropy_forward(losses, dlogits, logits, maxv, sums, N, Vvalid, Vs);
  softmax_crossentropy_backward(dlogits, dlogits, targets, weights, dloss, N, Vvalid, Vs, vocab_begin);
}

void adamw_update(float* params, float* copy, float* m, float* v, const float* grads, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
  AXONN_CHECK_ARG(copy == nullptr, "ref adamw_update: the fp32 table keeps no copy of the weights; pass null");
  float c1 = 1.0f - std::pow(beta1, (float)t);
  float c2 = 1.0f - std::pow(beta2, (float)t);
  for (int64_t i = 0; i < n; i++) {
    float g = grads[i] * grad_scale;
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    float mh = m[i] / c1;
    float vh = v[i] / c2;
    params[i] -= lr * (mh / (std::sqrt(vh) + eps) + weight_decay * params[i]);
  }
}

void sum_squares(double* sums, const float* const* tensors, const int64_t* sizes, int count) {
  for (int k = 0; k < count; k++) {
    double s = 0.0;
    for (int64_t i = 0; i < sizes[k]; i++) s += (double)tensors[k][i] * tensors[k][i];
    sums[k] = s;
  }
}

// --- the Llama block's ops -----------------------------------------------------------------------

void rmsnorm_sumsq(float* sumsq, const float* inp, int64_t N, int C) {
  // sumsq [N], inp [N,C]
  for (int64_t n = 0; n < N; n++) {
    float s = 0.0f;
    for (int i = 0; i < C; i++) s += inp[n * C + i] * inp[n * C + i];
    sumsq[n] = s;
  }
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int C, int C_total,
                     float eps) {
  // out [N,C], rstd [N] (in: sums of squares over C_total channels; out: 1/rms), inp [N,C], weight [C]
  for (int64_t n = 0; n < N; n++) {
    rstd[n] = 1.0f / std::sqrt(rstd[n] / (float)C_total + eps);
    for (int i = 0; i < C; i++) out[n * C + i] = inp[n * C + i] * rstd[n] * weight[i];
  }
}

void rmsnorm_backward_dot(float* dot, const float* dout, const float* inp, const float* weight, int64_t N, int C) {
  // dot [N], dout [N,C], inp [N,C], weight [C]
  for (int64_t n = 0; n < N; n++) {
    float s = 0.0f;
    for (int i = 0; i < C; i++) s += dout[n * C + i] * weight[i] * inp[n * C + i];
    dot[n] = s;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, const float* dot, int64_t N, int C, int C_total) {
  // dinp [N,C], dweight [C], dout [N,C], inp [N,C], weight [C], rstd [N], dot [N] (complete).
  // y = x r w with r = (sum x^2 / C_total + eps)^(-1/2): dr/dx_j = -r^3 x_j / C_total, so
  // dx_j = r (dy_j w_j - x_j r^2 dot / C_total), dot = sum_i dy_i w_i x_i.
  for (int64_t n = 0; n < N; n++) {
    const float r = rstd[n], k = r * r * dot[n] / (float)C_total;
    for (int i = 0; i < C; i++) {
      const float dy = dout[n * C + i], x = inp[n * C + i];
      dweight[i] += dy * x * r;
      dinp[n * C + i] += r * (dy * weight[i] - x * k);
    }
  }
}

void rope_forward(float* x, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  // x [B*T, stride] (in place), cos, sin [T, HS/2]
  const int half = HS / 2;
  for (int64_t r = 0; r < (int64_t)B * T; r++) {
    const float* c = cos + (r % T) * half;
    const float* s = sin + (r % T) * half;
    for (int h = 0; h < heads; h++) {
      float* v = x + r * stride + (int64_t)h * HS;
      for (int i = 0; i < half; i++) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

void rope_backward(float* dx, const float* cos, const float* sin, int B, int T, int heads, int HS, int stride) {
  // dx [B*T, stride] (in place), cos, sin [T, HS/2]: the rotation by minus the angle
  const int half = HS / 2;
  for (int64_t r = 0; r < (int64_t)B * T; r++) {
    const float* c = cos + (r % T) * half;
    const float* s = sin + (r % T) * half;
    for (int h = 0; h < heads; h++) {
      float* v = dx + r * stride + (int64_t)h * HS;
      for (int i = 0; i < half; i++) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] + b * s[i];
        v[i + half] = b * c[i] - a * s[i];
      }
    }
  }
}

void swiglu_forward(float* out, const float* inp, int64_t N, int F) {
  // out [N,F], inp [N,2F] = gate | up
  for (int64_t n = 0; n < N; n++)
    for (int i = 0; i < F; i++) {
      const float g = inp[n * 2 * F + i], u = inp[n * 2 * F + F + i];
      out[n * F + i] = g / (1.0f + std::exp(-g)) * u;
    }
}

void swiglu_backward(float* dinp, const float* inp, const float* dout, int64_t N, int F) {
  // dinp [N,2F], inp [N,2F], dout [N,F]; silu'(g) = sig(g) (1 + g (1 - sig(g)))
  for (int64_t n = 0; n < N; n++)
    for (int i = 0; i < F; i++) {
      const float g = inp[n * 2 * F + i], u = inp[n * 2 * F + F + i], d = dout[n * F + i];
      const float sig = 1.0f / (1.0f + std::exp(-g));
      dinp[n * 2 * F + i] += d * u * sig * (1.0f + g * (1.0f - sig));
      dinp[n * 2 * F + F + i] += d * g * sig;
    }
}

void repeat_kv_forward(float* out, const float* inp, int64_t N, int NH, int NKV, int HS) {
  // out [N, 3 NH HS], inp [N, (NH + 2 NKV) HS]
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
  for (int64_t n = 0; n < N; n++) {
    const float* in = inp + n * (Q + 2 * K);
    float* o = out + n * 3 * Q;
    for (int i = 0; i < Q; i++) o[i] = in[i];
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < HS; i++) {
        o[Q + h * HS + i] = in[Q + (h / G) * HS + i];
        o[2 * Q + h * HS + i] = in[Q + K + (h / G) * HS + i];
      }
  }
}

void repeat_kv_backward(float* dinp, const float* dout, int64_t N, int NH, int NKV, int HS) {
  // dinp [N, (NH + 2 NKV) HS], dout [N, 3 NH HS]
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
  for (int64_t n = 0; n < N; n++) {
    float* d = dinp + n * (Q + 2 * K);
    const float* o = dout + n * 3 * Q;
    for (int i = 0; i < Q; i++) d[i] += o[i];
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < HS; i++) {
        d[Q + (h / G) * HS + i] += o[Q + h * HS + i];
        d[Q + K + (h / G) * HS + i] += o[2 * Q + h * HS + i];
      }
  }
}

void kv_cache_append(float* kcache, float* vcache, const float* qkv, int B, int n, int pos, int Tc, int NH, int NKV,
                     int HS) {
  // kcache, vcache [B, Tc, NKV HS]; qkv [B n, (NH + 2 NKV) HS]
  const int Q = NH * HS, K = NKV * HS;
  for (int b = 0; b < B; b++)
    for (int i = 0; i < n; i++) {
      const float* row = qkv + ((int64_t)b * n + i) * (Q + 2 * K);
      float* kc = kcache + ((int64_t)b * Tc + pos + i) * K;
      float* vc = vcache + ((int64_t)b * Tc + pos + i) * K;
      for (int j = 0; j < K; j++) {
        kc[j] = row[Q + j];
        vc[j] = row[Q + K + j];
      }
    }
}

void attention_cached_forward(float* out, const float* qkv, const float* kcache, const float* vcache, int B, int n,
                              int pos, int Tc, int NH, int NKV, int HS) {
  // out [B n, NH HS]; qkv [B n, (NH + 2 NKV) HS]; kcache, vcache [B, Tc, NKV HS]
  const int G = NH / NKV, Q = NH * HS, K = NKV * HS;
  const float scale = 1.0f / std::sqrt((float)HS);
  std::vector<float> a(static_cast<size_t>(Tc));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int i = 0; i < n; i++) {
        const int t = pos + i;  // the query's position: it sees the cache's positions [0, t]
        const float* q = qkv + ((int64_t)b * n + i) * (Q + 2 * K) + h * HS;
        float maxv = -1e30f;
        for (int t2 = 0; t2 <= t; t2++) {
          const float* k = kcache + ((int64_t)b * Tc + t2) * K + (h / G) * HS;
          float dot = 0.0f;
          for (int j = 0; j < HS; j++) dot += q[j] * k[j];
          a[t2] = dot * scale;
          if (a[t2] > maxv) maxv = a[t2];
        }
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          a[t2] = std::exp(a[t2] - maxv);
          sum += a[t2];
        }
        float* o = out + ((int64_t)b * n + i) * Q + h * HS;
        for (int j = 0; j < HS; j++) o[j] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          const float* v = vcache + ((int64_t)b * Tc + t2) * K + (h / G) * HS;
          for (int j = 0; j < HS; j++) o[j] += a[t2] / sum * v[j];
        }
      }
}

}  // namespace axonn::kernels::ref
