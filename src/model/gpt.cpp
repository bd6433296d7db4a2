#include "axonn/model/gpt.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "axonn/core/error.hpp"
#include "axonn/core/profiler.hpp"

namespace axonn::model {

namespace {

constexpr const char* kParamNames[kNumParamTensors] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"};

// --- counter-based normal samples: splitmix64 of (seed, tensor, index) -> Box-Muller ----------
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

float normal_at(uint64_t seed, uint64_t tensor, uint64_t index) {
  uint64_t r = mix64(mix64(seed ^ mix64(tensor + 0x1234567ull)) + index);
  // two 24-bit uniforms in (0, 1]
  double u1 = (static_cast<double>(r >> 40) + 1.0) / 16777216.0;
  double u2 = static_cast<double>((r >> 16) & 0xFFFFFF) / 16777216.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

// Activation tensors kept from the forward for the backward ([L, ...] per layer).
enum Act : size_t {
  kEncoded, kLn1, kLn1Mean, kLn1Rstd, kQkv, kAtty, kAtt, kAttproj, kResidual2, kLn2, kLn2Mean, kLn2Rstd,
  kFch, kFchGelu, kFcproj, kResidual3, kLnf, kLnfMean, kLnfRstd, kLogits, kLosses, kInputs, kTargets,
};
// Backward scratch: gradients of one layer's activations, reused by every layer.
enum Scratch : size_t { kDResidual, kDLn, kDAtty, kDQkv, kDFch, kDFchGelu, kDAtt };

}  // namespace

// Each kernel call is timed under its op name when profiling is on.
#define AXONN_OP(op, ...)                      \
  do {                                         \
    ProfileScope scope_(profiler_, #op);       \
    ops_->op(__VA_ARGS__);                     \
  } while (0)

const char* param_name(Param p) { return kParamNames[static_cast<int>(p)]; }

Shape param_shape(const GptConfig& c, Param p) {
  int64_t L = c.num_layers, C = c.channels;
  switch (p) {
    case Param::kWte: return {c.padded_vocab_size, C};
    case Param::kWpe: return {c.max_seq_len, C};
    case Param::kLn1w: case Param::kLn1b: case Param::kAttprojb:
    case Param::kLn2w: case Param::kLn2b: case Param::kFcprojb: return {L, C};
    case Param::kQkvw: return {L, 3 * C, C};
    case Param::kQkvb: return {L, 3 * C};
    case Param::kAttprojw: return {L, C, C};
    case Param::kFcw: return {L, 4 * C, C};
    case Param::kFcb: return {L, 4 * C};
    case Param::kFcprojw: return {L, C, 4 * C};
    case Param::kLnfw: case Param::kLnfb: return {C};
  }
  return {};
}

bool param_is_matrix(Param p) {
  return p == Param::kWte || p == Param::kWpe || p == Param::kQkvw || p == Param::kAttprojw || p == Param::kFcw ||
         p == Param::kFcprojw;
}

void reserve_gpt_params(Arena& arena, const GptConfig& c) {
  for (int i = 0; i < kNumParamTensors; i++) arena.reserve(kParamNames[i], param_shape(c, static_cast<Param>(i)));
}

void init_gpt_params(Arena& params, const GptConfig& c, uint64_t seed) {
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(c.num_layers));
  for (int i = 0; i < kNumParamTensors; i++) {
    auto p = static_cast<Param>(i);
    Tensor t = params.tensor(static_cast<size_t>(i));
    float* w = t.f32();
    int64_t n = t.numel();
    switch (p) {
      case Param::kLn1w: case Param::kLn2w: case Param::kLnfw:
        for (int64_t j = 0; j < n; j++) w[j] = 1.0f;
        break;
      case Param::kWte: case Param::kWpe: case Param::kQkvw: case Param::kFcw:
      case Param::kAttprojw: case Param::kFcprojw: {
        float std = (p == Param::kAttprojw || p == Param::kFcprojw) ? residual_std : 0.02f;
        // padded vocabulary rows of wte stay zero: they are never a target
        int64_t live = p == Param::kWte ? (int64_t)c.vocab_size * c.channels : n;
#pragma omp parallel for schedule(static)
        for (int64_t j = 0; j < n; j++) w[j] = j < live ? std * normal_at(seed, static_cast<uint64_t>(i), j) : 0.0f;
        break;
      }
      default:  // biases
        for (int64_t j = 0; j < n; j++) w[j] = 0.0f;
    }
  }
}

Gpt::Gpt(GptConfig config, int B, int T, kernels::Backend backend)
    : config_(config), B_(B), T_(T), ops_(&kernels::ops_for(backend)), params_("parameters"),
      grads_("gradients"), acts_("activations"), scratch_("backward scratch") {
  config_.validate();
  AXONN_CHECK_ARG(B > 0, "batch size must be positive, got ", B);
  AXONN_CHECK_ARG(T > 0, "sequence length must be positive, got ", T);
  AXONN_CHECK_ARG(T <= config_.max_seq_len, "sequence length ", T, " exceeds the model's max_seq_len ",
                  config_.max_seq_len, "; use --seq-len <= ", config_.max_seq_len);
  reserve_gpt_params(params_, config_);
  grads_ = params_.clone_layout("gradients");
  params_.allocate();
  grads_.allocate();

  const int64_t L = config_.num_layers, C = config_.channels, NH = config_.num_heads, Vp = config_.padded_vocab_size;
  auto add = [&](Act a, const char* name, Shape s, DType dt = DType::kF32) {
    size_t slot = acts_.reserve(name, s, dt);
    AXONN_CHECK(slot == a, "activation slots out of order");
  };
  add(kEncoded, "encoded", {B, T, C});
  add(kLn1, "ln1", {L, B, T, C});
  add(kLn1Mean, "ln1_mean", {L, B, T});
  add(kLn1Rstd, "ln1_rstd", {L, B, T});
  add(kQkv, "qkv", {L, B, T, 3 * C});
  add(kAtty, "atty", {L, B, T, C});
  add(kAtt, "att", {L, B, NH, T, T});
  add(kAttproj, "attproj", {L, B, T, C});
  add(kResidual2, "residual2", {L, B, T, C});
  add(kLn2, "ln2", {L, B, T, C});
  add(kLn2Mean, "ln2_mean", {L, B, T});
  add(kLn2Rstd, "ln2_rstd", {L, B, T});
  add(kFch, "fch", {L, B, T, 4 * C});
  add(kFchGelu, "fch_gelu", {L, B, T, 4 * C});
  add(kFcproj, "fcproj", {L, B, T, C});
  add(kResidual3, "residual3", {L, B, T, C});
  add(kLnf, "lnf", {B, T, C});
  add(kLnfMean, "lnf_mean", {B, T});
  add(kLnfRstd, "lnf_rstd", {B, T});
  add(kLogits, "logits", {B, T, Vp});
  add(kLosses, "losses", {B, T});
  add(kInputs, "inputs", {B, T}, DType::kI32);
  add(kTargets, "targets", {B, T}, DType::kI32);
  acts_.allocate();

  auto sadd = [&](Scratch s, const char* name, Shape shape) {
    size_t slot = scratch_.reserve(name, shape);
    AXONN_CHECK(slot == s, "scratch slots out of order");
  };
  sadd(kDResidual, "dresidual", {B, T, C});
  sadd(kDLn, "dln", {B, T, C});
  sadd(kDAtty, "datty", {B, T, C});
  sadd(kDQkv, "dqkv", {B, T, 3 * C});
  sadd(kDFch, "dfch", {B, T, 4 * C});
  sadd(kDFchGelu, "dfch_gelu", {B, T, 4 * C});
  sadd(kDAtt, "datt", {B, NH, T, T});
  scratch_.allocate();
}

float Gpt::forward(const int* inputs, const int* targets) {
  const int B = B_, T = T_, C = config_.channels, NH = config_.num_heads, L = config_.num_layers;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  const int64_t N = (int64_t)B * T;
  auto P = [&](Param p) { return param(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };

  int* in = static_cast<int*>(A(kInputs).data());
  for (int64_t i = 0; i < N; i++) {
    AXONN_CHECK_ARG(inputs[i] >= 0 && inputs[i] < V, "token id ", inputs[i], " at position ", i,
                    " is outside the vocabulary [0, ", V, ")");
    in[i] = inputs[i];
  }
  have_targets_ = targets != nullptr;
  if (have_targets_) {
    int* tg = static_cast<int*>(A(kTargets).data());
    for (int64_t i = 0; i < N; i++) {
      AXONN_CHECK_ARG(targets[i] >= 0 && targets[i] < V, "target id ", targets[i], " at position ", i,
                      " is outside the vocabulary [0, ", V, ")");
      tg[i] = targets[i];
    }
  }

  AXONN_OP(embedding_forward, A(kEncoded).f32(), in, P(Param::kWte).f32(), 0, Vp, N, C);
  AXONN_OP(position_forward, A(kEncoded).f32(), P(Param::kWpe).f32(), B, T, C);
  for (int l = 0; l < L; l++) {
    const float* residual = l == 0 ? A(kEncoded).f32() : A(kResidual3)[l - 1].f32();
    float* ln1 = A(kLn1)[l].f32();
    float* qkv = A(kQkv)[l].f32();
    float* atty = A(kAtty)[l].f32();
    float* attproj = A(kAttproj)[l].f32();
    float* residual2 = A(kResidual2)[l].f32();
    float* ln2 = A(kLn2)[l].f32();
    float* fch = A(kFch)[l].f32();
    float* fch_gelu = A(kFchGelu)[l].f32();
    float* fcproj = A(kFcproj)[l].f32();
    // attention block
    AXONN_OP(layernorm_forward, ln1, A(kLn1Mean)[l].f32(), A(kLn1Rstd)[l].f32(), residual, P(Param::kLn1w)[l].f32(),
                        P(Param::kLn1b)[l].f32(), N, C, C, nullptr);
    AXONN_OP(matmul_forward, qkv, ln1, P(Param::kQkvw)[l].f32(), P(Param::kQkvb)[l].f32(), N, C, 3 * C);
    AXONN_OP(attention_forward, atty, A(kAtt)[l].f32(), qkv, B, T, C, NH);
    AXONN_OP(matmul_forward, attproj, atty, P(Param::kAttprojw)[l].f32(), P(Param::kAttprojb)[l].f32(), N, C, C);
    AXONN_OP(residual_forward, residual2, residual, attproj, N * C);
    // MLP block
    AXONN_OP(layernorm_forward, ln2, A(kLn2Mean)[l].f32(), A(kLn2Rstd)[l].f32(), residual2, P(Param::kLn2w)[l].f32(),
                        P(Param::kLn2b)[l].f32(), N, C, C, nullptr);
    AXONN_OP(matmul_forward, fch, ln2, P(Param::kFcw)[l].f32(), P(Param::kFcb)[l].f32(), N, C, 4 * C);
    AXONN_OP(gelu_forward, fch_gelu, fch, N * 4 * C);
    AXONN_OP(matmul_forward, fcproj, fch_gelu, P(Param::kFcprojw)[l].f32(), P(Param::kFcprojb)[l].f32(), N, 4 * C, C);
    AXONN_OP(residual_forward, A(kResidual3)[l].f32(), residual2, fcproj, N * C);
  }
  AXONN_OP(layernorm_forward, A(kLnf).f32(), A(kLnfMean).f32(), A(kLnfRstd).f32(), A(kResidual3)[L - 1].f32(),
                      P(Param::kLnfw).f32(), P(Param::kLnfb).f32(), N, C, C, nullptr);
  // LM head, tied to the token embedding: logits over the padded vocabulary
  float* logits = A(kLogits).f32();
  AXONN_OP(matmul_forward, logits, A(kLnf).f32(), P(Param::kWte).f32(), nullptr, N, C, Vp);
  if (!have_targets_) return std::numeric_limits<float>::quiet_NaN();
  // softmax + cross-entropy over the first V logits; probabilities overwrite the logits
  float* losses = A(kLosses).f32();
  AXONN_OP(softmax_crossentropy_forward, losses, logits, logits, static_cast<int*>(A(kTargets).data()), N, V, Vp, 0, nullptr);
  double sum = 0.0;
  for (int64_t i = 0; i < N; i++) sum += losses[i];
  return static_cast<float>(sum / static_cast<double>(N));
}

void Gpt::backward() {
  AXONN_CHECK(have_targets_, "backward() needs a forward() with targets");
  const int B = B_, T = T_, C = config_.channels, NH = config_.num_heads, L = config_.num_layers;
  const int V = config_.vocab_size, Vp = config_.padded_vocab_size;
  const int64_t N = (int64_t)B * T;
  auto P = [&](Param p) { return param(p); };
  auto G = [&](Param p) { return grad(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return scratch_.tensor(s).f32(); };
  const int* in = static_cast<const int*>(A(kInputs).data());
  scratch_.zero();

  // The residual stream's gradient is accumulated in one buffer (dresidual): a residual add
  // passes its output gradient unchanged to both inputs, so the branch reads dresidual as its
  // output gradient and the LayerNorm at the branch's start adds its input gradient back into it.
  float* dresidual = S(kDResidual);
  float* dln = S(kDLn);

  // d logits, in place over the probabilities: the loss is the mean over the B*T positions
  float* dlogits = A(kLogits).f32();
  AXONN_OP(softmax_crossentropy_backward, dlogits, dlogits, static_cast<const int*>(A(kTargets).data()),
                                  1.0f / static_cast<float>(N), N, V, Vp, 0);
  AXONN_OP(matmul_backward, dln, G(Param::kWte).f32(), nullptr, dlogits, A(kLnf).f32(), P(Param::kWte).f32(), N, C, Vp);
  AXONN_OP(layernorm_backward, dresidual, G(Param::kLnfw).f32(), G(Param::kLnfb).f32(), dln, A(kResidual3)[L - 1].f32(),
                       P(Param::kLnfw).f32(), A(kLnfMean).f32(), A(kLnfRstd).f32(), N, C, C, nullptr);

  for (int l = L - 1; l >= 0; l--) {
    const float* residual = l == 0 ? A(kEncoded).f32() : A(kResidual3)[l - 1].f32();
    // MLP block, reversed
    std::memset(S(kDFchGelu), 0, sizeof(float) * N * 4 * C);
    std::memset(S(kDFch), 0, sizeof(float) * N * 4 * C);
    std::memset(dln, 0, sizeof(float) * N * C);
    AXONN_OP(matmul_backward, S(kDFchGelu), G(Param::kFcprojw)[l].f32(), G(Param::kFcprojb)[l].f32(), dresidual,
                      A(kFchGelu)[l].f32(), P(Param::kFcprojw)[l].f32(), N, 4 * C, C);
    AXONN_OP(gelu_backward, S(kDFch), A(kFch)[l].f32(), S(kDFchGelu), N * 4 * C);
    AXONN_OP(matmul_backward, dln, G(Param::kFcw)[l].f32(), G(Param::kFcb)[l].f32(), S(kDFch), A(kLn2)[l].f32(),
                      P(Param::kFcw)[l].f32(), N, C, 4 * C);
    AXONN_OP(layernorm_backward, dresidual, G(Param::kLn2w)[l].f32(), G(Param::kLn2b)[l].f32(), dln,
                         A(kResidual2)[l].f32(), P(Param::kLn2w)[l].f32(), A(kLn2Mean)[l].f32(),
                         A(kLn2Rstd)[l].f32(), N, C, C, nullptr);
    // attention block, reversed
    std::memset(S(kDAtty), 0, sizeof(float) * N * C);
    std::memset(S(kDQkv), 0, sizeof(float) * N * 3 * C);
    std::memset(dln, 0, sizeof(float) * N * C);
    AXONN_OP(matmul_backward, S(kDAtty), G(Param::kAttprojw)[l].f32(), G(Param::kAttprojb)[l].f32(), dresidual,
                      A(kAtty)[l].f32(), P(Param::kAttprojw)[l].f32(), N, C, C);
    AXONN_OP(attention_backward, S(kDQkv), S(kDAtt), S(kDAtty), A(kQkv)[l].f32(), A(kAtt)[l].f32(), B, T, C, NH);
    AXONN_OP(matmul_backward, dln, G(Param::kQkvw)[l].f32(), G(Param::kQkvb)[l].f32(), S(kDQkv), A(kLn1)[l].f32(),
                      P(Param::kQkvw)[l].f32(), N, C, 3 * C);
    AXONN_OP(layernorm_backward, dresidual, G(Param::kLn1w)[l].f32(), G(Param::kLn1b)[l].f32(), dln, residual,
                         P(Param::kLn1w)[l].f32(), A(kLn1Mean)[l].f32(), A(kLn1Rstd)[l].f32(), N, C, C, nullptr);
  }
  AXONN_OP(embedding_backward, G(Param::kWte).f32(), dresidual, in, 0, Vp, N, C);
  AXONN_OP(position_backward, G(Param::kWpe).f32(), dresidual, B, T, C);
  // the probabilities were overwritten by their gradient: another backward needs another forward
  have_targets_ = false;
}

const float* Gpt::output() const { return acts_.tensor(kLogits).f32(); }

double Gpt::flops_per_step() const {
  const double C = config_.channels, L = config_.num_layers, Vp = config_.padded_vocab_size, T = T_;
  const double tokens = static_cast<double>(B_) * T_;
  // forward per token: 2 FLOPs per weight of the matmuls (12 C^2 per layer, C Vp for the head)
  // plus attention's two T x T products (q k^T and att v), counted in full as is customary
  double fwd_per_token = 2.0 * (12.0 * C * C * L + C * Vp) + 2.0 * 2.0 * T * C * L;
  return 3.0 * fwd_per_token * tokens;
}

}  // namespace axonn::model
