// kernels/ref — naive implementations of the op list: plain loops, one thread, no BLAS.
// They follow llm.c's train_gpt2.c formulas and are the oracle the fast kernels are tested against.
#include <cmath>
#include <cstring>
#include <vector>

#include "axonn/kernels/ops.hpp"

namespace axonn::kernels::ref {

namespace {
constexpr float kLayerNormEps = 1e-5f;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
}  // namespace

void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
  // out [B,T,C], inp [B,T], wte [Vp,C], wpe [maxT,C]
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      float* o = out + ((int64_t)b * T + t) * C;
      const float* e = wte + (int64_t)inp[b * T + t] * C;
      const float* p = wpe + (int64_t)t * C;
      for (int i = 0; i < C; i++) o[i] = e[i] + p[i];
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, int B, int T, int C) {
  // dwte [Vp,C], dwpe [maxT,C], dout [B,T,C], inp [B,T]
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const float* d = dout + ((int64_t)b * T + t) * C;
      float* de = dwte + (int64_t)inp[b * T + t] * C;
      float* dp = dwpe + (int64_t)t * C;
      for (int i = 0; i < C; i++) {
        de[i] += d[i];
        dp[i] += d[i];
      }
    }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int64_t N, int C) {
  // out [N,C], mean [N], rstd [N], inp [N,C], weight [C], bias [C]
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    float m = 0.0f;
    for (int i = 0; i < C; i++) m += x[i];
    m /= (float)C;
    float v = 0.0f;
    for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
    v /= (float)C;
    float s = 1.0f / std::sqrt(v + kLayerNormEps);
    float* o = out + n * C;
    for (int i = 0; i < C; i++) o[i] = s * (x[i] - m) * weight[i] + bias[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int C) {
  // dinp [N,C], dweight [C], dbias [C], dout [N,C], inp [N,C], weight [C], mean [N], rstd [N]
  for (int64_t n = 0; n < N; n++) {
    const float* dy = dout + n * C;
    const float* x = inp + n * C;
    float* dx = dinp + n * C;
    float m = mean[n], s = rstd[n];
    // the two reductions of the input gradient: mean(dy*w) and mean(dy*w*xhat)
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int i = 0; i < C; i++) {
      float xhat = (x[i] - m) * s;
      float dnorm = weight[i] * dy[i];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * xhat;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    for (int i = 0; i < C; i++) {
      float xhat = (x[i] - m) * s;
      float dnorm = weight[i] * dy[i];
      dbias[i] += dy[i];
      dweight[i] += xhat * dy[i];
      dx[i] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * s;
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

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* att,
                        int B, int T, int C, int NH) {
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

void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int* targets,
                                  int64_t N, int V, int Vp) {
  // losses [N], probs [N,Vp], logits [N,Vp], targets [N]
  for (int64_t n = 0; n < N; n++) {
    const float* z = logits + n * Vp;
    float* p = probs + n * Vp;
    float maxv = -1e30f;
    for (int i = 0; i < V; i++) maxv = z[i] > maxv ? z[i] : maxv;
    float sum = 0.0f;
    for (int i = 0; i < V; i++) {
      p[i] = std::exp(z[i] - maxv);
      sum += p[i];
    }
    for (int i = 0; i < V; i++) p[i] /= sum;
    for (int i = V; i < Vp; i++) p[i] = 0.0f;
    losses[n] = -std::log(p[targets[n]]);
  }
}

void softmax_crossentropy_backward(float* dlogits, const float* probs, const int* targets, float dloss,
                                   int64_t N, int V, int Vp) {
  // dlogits [N,Vp], probs [N,Vp], targets [N]
  for (int64_t n = 0; n < N; n++) {
    float* dz = dlogits + n * Vp;
    const float* p = probs + n * Vp;
    if (dz == p) {  // in place: overwrite
      for (int i = 0; i < V; i++) dz[i] = (dz[i] - (i == targets[n] ? 1.0f : 0.0f)) * dloss;
      for (int i = V; i < Vp; i++) dz[i] = 0.0f;
    } else {
      for (int i = 0; i < V; i++) dz[i] += (p[i] - (i == targets[n] ? 1.0f : 0.0f)) * dloss;
    }
  }
}

void adamw_update(float* params, float* m, float* v, const float* grads, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, float grad_scale, int t) {
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

double sum_squares(const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

}  // namespace axonn::kernels::ref
