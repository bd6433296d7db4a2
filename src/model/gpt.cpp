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

// Activation tensors kept from the forward for the backward ([L, ...] per layer); shapes local.
enum Act : size_t {
  kEncoded, kLn1, kLn1Mean, kLn1Rstd, kQkv, kAtty, kAtt, kAttproj, kResidual2, kLn2, kLn2Mean, kLn2Rstd,
  kFch, kFchGelu, kFcproj, kResidual3, kLnf, kLnfMean, kLnfRstd, kLnfFull, kLogits, kLosses, kInputs, kTargets,
};
// Backward scratch (gradients of one layer's activations, reused by every layer) and workspaces.
enum Scratch : size_t {
  kDResidual, kDLn, kDAtty, kDQkv, kDFch, kDFchGelu, kDAtt, kFullA, kFullB, kGathered, kDwBlock,
};

void reduce_over(void* ctx, float* values, int64_t n, bool max) {
  static_cast<comm::Communicator*>(ctx)->all_reduce(values, static_cast<size_t>(n), DType::kF32,
                                                    max ? comm::ReduceOp::kMax : comm::ReduceOp::kSum);
}

// Columns [c0, c0 + width) of every row of a [rows, full_width] matrix, into [rows, width].
void copy_columns(float* out, const float* in, int64_t rows, int full_width, int c0, int width) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; r++)
    std::memcpy(out + r * width, in + r * full_width + c0, sizeof(float) * static_cast<size_t>(width));
}

// Checks the model against the grid before anything is built from it, so that the messages name
// the model's sizes (the linear layers check their weight blocks against Gz afterwards).
const GptConfig& checked(const GptConfig& c, const parallel::GridShape& g) {
  c.validate();
  AXONN_CHECK_ARG(c.channels % g.gx == 0, "channels ", c.channels, " are not divisible by Gx=", g.gx,
                  "; the hidden size is split over X: choose a Gx that divides ", c.channels);
  AXONN_CHECK_ARG(c.num_heads % g.gy == 0, "heads ", c.num_heads, " are not divisible by Gy=", g.gy,
                  "; attention heads are split over Y: choose a Gy that divides ", c.num_heads);
  AXONN_CHECK_ARG(c.channels % g.gy == 0, "channels ", c.channels, " are not divisible by Gy=", g.gy,
                  "; attention and MLP outputs are split over Y: choose a Gy that divides ", c.channels);
  return c;
}

}  // namespace

// Each kernel call is timed under its op name when profiling is on.
#define AXONN_OP(op, ...)                \
  do {                                   \
    ProfileScope scope_(profiler_, #op); \
    ops_->op(__VA_ARGS__);               \
  } while (0)
// Each tensor-parallel linear (GEMMs and their collectives) under the layer's direction.
#define AXONN_LINEAR(layer, direction, ...)                    \
  do {                                                         \
    ProfileScope scope_(profiler_, "linear_" #direction);      \
    layer.direction(__VA_ARGS__, *ops_);                       \
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

bool param_is_per_layer(Param p) {
  return p != Param::kWte && p != Param::kWpe && p != Param::kLnfw && p != Param::kLnfb;
}

bool param_is_matrix(Param p) {
  return p == Param::kWte || p == Param::kWpe || p == Param::kQkvw || p == Param::kAttprojw || p == Param::kFcw ||
         p == Param::kFcprojw;
}

void reserve_gpt_params(Arena& arena, const GptConfig& c) {
  for (int i = 0; i < kNumParamTensors; i++) arena.reserve(kParamNames[i], param_shape(c, static_cast<Param>(i)));
}

float gpt2_init_value(const GptConfig& c, Param p, int64_t index, uint64_t seed) {
  switch (p) {
    case Param::kLn1w: case Param::kLn2w: case Param::kLnfw: return 1.0f;
    case Param::kWte:
      // padded vocabulary rows stay zero: they are never a target
      if (index >= static_cast<int64_t>(c.vocab_size) * c.channels) return 0.0f;
      [[fallthrough]];
    case Param::kWpe: case Param::kQkvw: case Param::kFcw:
      return 0.02f * normal_at(seed, static_cast<uint64_t>(p), static_cast<uint64_t>(index));
    case Param::kAttprojw: case Param::kFcprojw:
      return 0.02f / std::sqrt(2.0f * static_cast<float>(c.num_layers)) *
             normal_at(seed, static_cast<uint64_t>(p), static_cast<uint64_t>(index));
    default: return 0.0f;  // biases
  }
}

void init_gpt_params(Arena& params, const GptConfig& c, uint64_t seed) {
  for (int i = 0; i < kNumParamTensors; i++) {
    Tensor t = params.tensor(static_cast<size_t>(i));
    float* w = t.f32();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < t.numel(); j++) w[j] = gpt2_init_value(c, static_cast<Param>(i), j, seed);
  }
}

Gpt::Gpt(GptConfig config, const parallel::Grid& grid, int B, int T, kernels::Backend backend)
    : config_(checked(config, grid.shape())), grid_(grid), B_(B), T_(T), ops_(&kernels::ops_for(backend)),
      qkv_(grid, {.in = config.channels, .out = 3 * config.channels, .out_parts = 3}, "qkv"),
      attproj_(grid, {.in = config.channels, .out = config.channels, .transposed = true}, "attproj"),
      fc_(grid, {.in = config.channels, .out = 4 * config.channels}, "fc"),
      fcproj_(grid, {.in = 4 * config.channels, .out = config.channels, .transposed = true}, "fcproj"),
      params_("parameters"), grads_("gradients"), acts_("activations"), scratch_("backward scratch") {
  const parallel::GridShape& g = grid.shape();
  const parallel::GridCoords& at = grid.coords();
  const int C = config_.channels, NH = config_.num_heads, L = config_.num_layers, Vp = config_.padded_vocab_size;
  AXONN_CHECK_ARG(B > 0, "batch size must be positive, got ", B);
  AXONN_CHECK_ARG(T > 0, "sequence length must be positive, got ", T);
  AXONN_CHECK_ARG(T <= config_.max_seq_len, "sequence length ", T, " exceeds the model's max_seq_len ",
                  config_.max_seq_len, "; use --seq-len <= ", config_.max_seq_len);
  Cx_ = C / g.gx;
  Cy_ = C / g.gy;
  NHy_ = NH / g.gy;
  const int gxy = g.gx * g.gy, r = grid.xy().rank();
  vocab_begin_ = static_cast<int>(parallel::split_begin(Vp, gxy, r));
  vocab_rows_ = static_cast<int>(parallel::split_begin(Vp, gxy, r + 1)) - vocab_begin_;
  vocab_valid_ = std::max(0, std::min(config_.vocab_size - vocab_begin_, vocab_rows_));
  if (g.gx > 1) x_reducer_ = {reduce_over, &grid.x()};
  if (gxy > 1) xy_reducer_ = {reduce_over, &grid.xy()};
  (void)at;

  // parameters: this rank's shards, one slot per llm.c tensor, stacked over layers
  const int64_t L64 = L;
  auto add_param = [&](Param p, Shape s) {
    size_t slot = params_.reserve(param_name(p), s);
    AXONN_CHECK(slot == static_cast<size_t>(p), "parameter slots out of order");
  };
  add_param(Param::kWte, {vocab_rows_, C});
  add_param(Param::kWpe, {config_.max_seq_len, Cx_});
  add_param(Param::kLn1w, {L64, Cx_});
  add_param(Param::kLn1b, {L64, Cx_});
  add_param(Param::kQkvw, {L64, qkv_.layout().shard_size});
  add_param(Param::kQkvb, {L64, qkv_.layout().out_local});
  add_param(Param::kAttprojw, {L64, attproj_.layout().shard_size});
  add_param(Param::kAttprojb, {L64, attproj_.layout().out_local});
  add_param(Param::kLn2w, {L64, Cx_});
  add_param(Param::kLn2b, {L64, Cx_});
  add_param(Param::kFcw, {L64, fc_.layout().shard_size});
  add_param(Param::kFcb, {L64, fc_.layout().out_local});
  add_param(Param::kFcprojw, {L64, fcproj_.layout().shard_size});
  add_param(Param::kFcprojb, {L64, fcproj_.layout().out_local});
  add_param(Param::kLnfw, {Cx_});
  add_param(Param::kLnfb, {Cx_});
  grads_ = params_.clone_layout("gradients");
  params_.allocate();
  grads_.allocate();

  // activations kept for the backward
  const int64_t N = static_cast<int64_t>(B) * T;
  auto add = [&](Act a, const char* name, Shape s, DType dt = DType::kF32) {
    size_t slot = acts_.reserve(name, s, dt);
    AXONN_CHECK(slot == a, "activation slots out of order");
  };
  add(kEncoded, "encoded", {N, Cx_});
  add(kLn1, "ln1", {L64, N, Cx_});
  add(kLn1Mean, "ln1_mean", {L64, N});
  add(kLn1Rstd, "ln1_rstd", {L64, N});
  add(kQkv, "qkv", {L64, N, 3 * Cy_});
  add(kAtty, "atty", {L64, N, Cy_});
  add(kAtt, "att", {L64, B, NHy_, T, T});
  add(kAttproj, "attproj", {L64, N, Cx_});
  add(kResidual2, "residual2", {L64, N, Cx_});
  add(kLn2, "ln2", {L64, N, Cx_});
  add(kLn2Mean, "ln2_mean", {L64, N});
  add(kLn2Rstd, "ln2_rstd", {L64, N});
  add(kFch, "fch", {L64, N, 4 * Cy_});
  add(kFchGelu, "fch_gelu", {L64, N, 4 * Cy_});
  add(kFcproj, "fcproj", {L64, N, Cx_});
  add(kResidual3, "residual3", {L64, N, Cx_});
  add(kLnf, "lnf", {N, Cx_});
  add(kLnfMean, "lnf_mean", {N});
  add(kLnfRstd, "lnf_rstd", {N});
  add(kLnfFull, "lnf_full", {g.gx > 1 ? N : 0, C});  // the LM head's input, all channels
  add(kLogits, "logits", {N, vocab_rows_});
  add(kLosses, "losses", {N});
  add(kInputs, "inputs", {N}, DType::kI32);
  add(kTargets, "targets", {N}, DType::kI32);
  acts_.allocate();

  int64_t block = 0;
  for (const parallel::TpLinear* lin : {&qkv_, &attproj_, &fc_, &fcproj_})
    block = std::max(block, lin->layout().block_size);
  auto sadd = [&](Scratch s, const char* name, Shape shape) {
    size_t slot = scratch_.reserve(name, shape);
    AXONN_CHECK(slot == s, "scratch slots out of order");
  };
  sadd(kDResidual, "dresidual", {N, Cx_});
  sadd(kDLn, "dln", {N, Cx_});
  sadd(kDAtty, "datty", {N, Cy_});
  sadd(kDQkv, "dqkv", {N, 3 * Cy_});
  sadd(kDFch, "dfch", {N, 4 * Cy_});
  sadd(kDFchGelu, "dfch_gelu", {N, 4 * Cy_});
  sadd(kDAtt, "datt", {B, NHy_, T, T});
  const bool sharded_channels = gxy > 1;  // embeddings and the head work on all C channels
  sadd(kFullA, "full_a", {sharded_channels ? N : 0, C});
  sadd(kFullB, "full_b", {sharded_channels ? N : 0, C});
  sadd(kGathered, "gathered_weight", {g.gz > 1 ? block : 0});
  sadd(kDwBlock, "dweight_block", {g.gz > 1 ? block : 0});
  scratch_.allocate();
}

Gpt::~Gpt() = default;

int64_t Gpt::full_layer_numel(Param p) const {
  Shape s = param_shape(config_, p);
  return param_is_per_layer(p) ? s.numel() / s[0] : s.numel();
}

int64_t Gpt::global_index(Param p, int64_t j) const {
  const int64_t C = config_.channels;
  const int x = grid_.coords().x;
  switch (p) {
    case Param::kWte: return static_cast<int64_t>(vocab_begin_) * C + j;  // rows [begin, begin + rows)
    case Param::kWpe: return (j / Cx_) * C + static_cast<int64_t>(x) * Cx_ + j % Cx_;  // X slice of channels
    case Param::kLn1w: case Param::kLn1b: case Param::kLn2w: case Param::kLn2b:
    case Param::kLnfw: case Param::kLnfb: return static_cast<int64_t>(x) * Cx_ + j;
    case Param::kQkvw: return qkv_.layout().weight_index(qkv_.layout().shard_offset + j);
    case Param::kAttprojw: return attproj_.layout().weight_index(attproj_.layout().shard_offset + j);
    case Param::kFcw: return fc_.layout().weight_index(fc_.layout().shard_offset + j);
    case Param::kFcprojw: return fcproj_.layout().weight_index(fcproj_.layout().shard_offset + j);
    case Param::kQkvb: return qkv_.layout().out_row(static_cast<int>(j));
    case Param::kAttprojb: return attproj_.layout().out_row(static_cast<int>(j));
    case Param::kFcb: return fc_.layout().out_row(static_cast<int>(j));
    case Param::kFcprojb: return fcproj_.layout().out_row(static_cast<int>(j));
  }
  return 0;
}

void Gpt::load_full_layer(Param p, int layer, const float* full) {
  Tensor t = param(p);
  float* dst = param_is_per_layer(p) ? t[layer].f32() : t.f32();
  int64_t n = param_is_per_layer(p) ? t[layer].numel() : t.numel();
  for (int64_t j = 0; j < n; j++) dst[j] = full[global_index(p, j)];
}

void Gpt::init_random(uint64_t seed) {
  for (int i = 0; i < kNumParamTensors; i++) {
    auto p = static_cast<Param>(i);
    Tensor t = param(p);
    const int layers = param_is_per_layer(p) ? config_.num_layers : 1;
    const int64_t per_layer = t.numel() / layers, full = full_layer_numel(p);
    float* w = t.f32();
#pragma omp parallel for collapse(2) schedule(static)
    for (int l = 0; l < layers; l++)
      for (int64_t j = 0; j < per_layer; j++)
        w[l * per_layer + j] = gpt2_init_value(config_, p, l * full + global_index(p, j), seed);
  }
}

// The rows of x_slice [N, C/Gx] with all C channels, gathered over X into `full` ([N, C]);
// `scratch` ([N, C]) receives the all-gather's rank-major blocks. With Gx = 1, x_slice itself.
const float* Gpt::full_channels(const float* x_slice, float* full, float* scratch) const {
  const comm::Communicator& xg = grid_.x();
  if (xg.size() == 1) return x_slice;
  const int64_t N = static_cast<int64_t>(B_) * T_;
  const int C = config_.channels;
  grid_.x().all_gather(x_slice, scratch, static_cast<size_t>(N) * Cx_, DType::kF32);  // over X
#pragma omp parallel for collapse(2) schedule(static)
  for (int r = 0; r < xg.size(); r++)
    for (int64_t n = 0; n < N; n++)
      std::memcpy(full + n * C + static_cast<int64_t>(r) * Cx_, scratch + (r * N + n) * Cx_, sizeof(float) * Cx_);
  return full;
}

float Gpt::forward(const int* inputs, const int* targets) {
  const int B = B_, T = T_, C = config_.channels, L = config_.num_layers, V = config_.vocab_size;
  const int Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * T;
  const kernels::RowReducer* over_x = x_reducer_.all_reduce ? &x_reducer_ : nullptr;
  const kernels::RowReducer* over_xy = xy_reducer_.all_reduce ? &xy_reducer_ : nullptr;
  auto P = [&](Param p) { return param(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return scratch_.tensor(s).f32(); };
  float* gathered = S(kGathered);

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

  // token embedding, vocabulary-parallel: each rank of X*Y looks up the tokens among its rows
  // (zeros for the others); the all-reduce completes every row; this rank keeps its X channels
  float* encoded = A(kEncoded).f32();
  if (grid_.xy().size() == 1) {
    AXONN_OP(embedding_forward, encoded, in, P(Param::kWte).f32(), vocab_begin_, Vr, N, C);
  } else {
    float* emb = S(kFullA);
    AXONN_OP(embedding_forward, emb, in, P(Param::kWte).f32(), vocab_begin_, Vr, N, C);
    grid_.xy().all_reduce(emb, static_cast<size_t>(N) * C, DType::kF32);  // over X*Y
    copy_columns(encoded, emb, N, C, grid_.coords().x * Cx_, Cx_);
  }
  AXONN_OP(position_forward, encoded, P(Param::kWpe).f32(), B, T, Cx_);

  for (int l = 0; l < L; l++) {
    const float* residual = l == 0 ? encoded : A(kResidual3)[l - 1].f32();
    float* ln1 = A(kLn1)[l].f32();
    float* qkv = A(kQkv)[l].f32();
    float* atty = A(kAtty)[l].f32();
    float* attproj = A(kAttproj)[l].f32();
    float* residual2 = A(kResidual2)[l].f32();
    float* ln2 = A(kLn2)[l].f32();
    float* fch = A(kFch)[l].f32();
    float* fch_gelu = A(kFchGelu)[l].f32();
    float* fcproj = A(kFcproj)[l].f32();
    // attention block: LayerNorm (statistics over X) -> QKV (A) -> attention on this rank's heads -> proj (B)
    AXONN_OP(layernorm_forward, ln1, A(kLn1Mean)[l].f32(), A(kLn1Rstd)[l].f32(), residual,
             P(Param::kLn1w)[l].f32(), P(Param::kLn1b)[l].f32(), N, Cx_, C, over_x);
    AXONN_LINEAR(qkv_, forward, qkv, ln1, P(Param::kQkvw)[l].f32(), P(Param::kQkvb)[l].f32(), gathered, N);
    AXONN_OP(attention_forward, atty, A(kAtt)[l].f32(), qkv, B, T, Cy_, NHy_);
    AXONN_LINEAR(attproj_, forward, attproj, atty, P(Param::kAttprojw)[l].f32(), P(Param::kAttprojb)[l].f32(),
                 gathered, N);
    AXONN_OP(residual_forward, residual2, residual, attproj, N * Cx_);
    // MLP block: LayerNorm -> FC (A) -> GELU on this rank's 4C/Gy -> FC2 (B)
    AXONN_OP(layernorm_forward, ln2, A(kLn2Mean)[l].f32(), A(kLn2Rstd)[l].f32(), residual2,
             P(Param::kLn2w)[l].f32(), P(Param::kLn2b)[l].f32(), N, Cx_, C, over_x);
    AXONN_LINEAR(fc_, forward, fch, ln2, P(Param::kFcw)[l].f32(), P(Param::kFcb)[l].f32(), gathered, N);
    AXONN_OP(gelu_forward, fch_gelu, fch, N * 4 * Cy_);
    AXONN_LINEAR(fcproj_, forward, fcproj, fch_gelu, P(Param::kFcprojw)[l].f32(), P(Param::kFcprojb)[l].f32(),
                 gathered, N);
    AXONN_OP(residual_forward, A(kResidual3)[l].f32(), residual2, fcproj, N * Cx_);
  }
  float* lnf = A(kLnf).f32();
  AXONN_OP(layernorm_forward, lnf, A(kLnfMean).f32(), A(kLnfRstd).f32(), A(kResidual3)[L - 1].f32(),
           P(Param::kLnfw).f32(), P(Param::kLnfb).f32(), N, Cx_, C, over_x);
  // LM head, tied to the token embedding: all channels of lnf (gathered over X) against this
  // rank's vocabulary rows
  const float* lnf_full = full_channels(lnf, A(kLnfFull).f32(), S(kFullB));
  float* logits = A(kLogits).f32();
  AXONN_OP(matmul_forward, logits, lnf_full, P(Param::kWte).f32(), nullptr, N, C, Vr);
  if (!have_targets_) return std::numeric_limits<float>::quiet_NaN();
  // vocabulary-parallel softmax + cross-entropy over X*Y; probabilities overwrite the logits
  float* losses = A(kLosses).f32();
  AXONN_OP(softmax_crossentropy_forward, losses, logits, logits, static_cast<int*>(A(kTargets).data()), N,
           vocab_valid_, Vr, vocab_begin_, over_xy);
  // the mean over the global batch: this rank's tokens are summed, then over Z and data
  double local = 0.0;
  for (int64_t i = 0; i < N; i++) local += losses[i];
  float sum = static_cast<float>(local);
  grid_.z().all_reduce(&sum, 1, DType::kF32);     // over Z
  grid_.data().all_reduce(&sum, 1, DType::kF32);  // over data
  const double global_tokens = static_cast<double>(N) * grid_.shape().gz * grid_.shape().gdata;
  return static_cast<float>(sum / global_tokens);
}

void Gpt::backward() {
  AXONN_CHECK(have_targets_, "backward() needs a forward() with targets");
  const int B = B_, T = T_, C = config_.channels, L = config_.num_layers, Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * T;
  const kernels::RowReducer* over_x = x_reducer_.all_reduce ? &x_reducer_ : nullptr;
  auto P = [&](Param p) { return param(p); };
  auto G = [&](Param p) { return grad(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return scratch_.tensor(s).f32(); };
  const int* in = static_cast<const int*>(A(kInputs).data());
  float* gathered = S(kGathered);
  float* dw_block = S(kDwBlock);
  scratch_.zero();

  // The residual stream's gradient is accumulated in one buffer (dresidual): a residual add
  // passes its output gradient unchanged to both inputs, so the branch reads dresidual as its
  // output gradient and the LayerNorm at the branch's start adds its input gradient back into it.
  float* dresidual = S(kDResidual);
  float* dln = S(kDLn);

  // d logits, in place over the probabilities: the loss is the mean over the global batch
  const double global_tokens = static_cast<double>(N) * grid_.shape().gz * grid_.shape().gdata;
  float* dlogits = A(kLogits).f32();
  AXONN_OP(softmax_crossentropy_backward, dlogits, dlogits, static_cast<const int*>(A(kTargets).data()),
           static_cast<float>(1.0 / global_tokens), N, vocab_valid_, Vr, vocab_begin_);
  // LM head: d lnf over all channels is partial over X*Y (each rank has its vocabulary rows):
  // all-reduced over X*Y, then this rank keeps its X channels
  const float* lnf_full = grid_.x().size() == 1 ? A(kLnf).f32() : A(kLnfFull).f32();
  if (grid_.xy().size() == 1) {
    AXONN_OP(matmul_backward, dln, G(Param::kWte).f32(), nullptr, dlogits, lnf_full, P(Param::kWte).f32(), N, C, Vr);
  } else {
    float* dfull = S(kFullA);
    AXONN_OP(matmul_backward, dfull, G(Param::kWte).f32(), nullptr, dlogits, lnf_full, P(Param::kWte).f32(), N, C,
             Vr);
    grid_.xy().all_reduce(dfull, static_cast<size_t>(N) * C, DType::kF32);  // over X*Y
    copy_columns(dln, dfull, N, C, grid_.coords().x * Cx_, Cx_);
  }
  AXONN_OP(layernorm_backward, dresidual, G(Param::kLnfw).f32(), G(Param::kLnfb).f32(), dln,
           A(kResidual3)[L - 1].f32(), P(Param::kLnfw).f32(), A(kLnfMean).f32(), A(kLnfRstd).f32(), N, Cx_, C,
           over_x);

  for (int l = L - 1; l >= 0; l--) {
    const float* residual = l == 0 ? A(kEncoded).f32() : A(kResidual3)[l - 1].f32();
    // MLP block, reversed
    std::memset(S(kDFchGelu), 0, sizeof(float) * N * 4 * Cy_);
    std::memset(S(kDFch), 0, sizeof(float) * N * 4 * Cy_);
    std::memset(dln, 0, sizeof(float) * N * Cx_);
    AXONN_LINEAR(fcproj_, backward, S(kDFchGelu), G(Param::kFcprojw)[l].f32(), G(Param::kFcprojb)[l].f32(),
                 dresidual, A(kFchGelu)[l].f32(), P(Param::kFcprojw)[l].f32(), gathered, dw_block, N);
    AXONN_OP(gelu_backward, S(kDFch), A(kFch)[l].f32(), S(kDFchGelu), N * 4 * Cy_);
    AXONN_LINEAR(fc_, backward, dln, G(Param::kFcw)[l].f32(), G(Param::kFcb)[l].f32(), S(kDFch), A(kLn2)[l].f32(),
                 P(Param::kFcw)[l].f32(), gathered, dw_block, N);
    AXONN_OP(layernorm_backward, dresidual, G(Param::kLn2w)[l].f32(), G(Param::kLn2b)[l].f32(), dln,
             A(kResidual2)[l].f32(), P(Param::kLn2w)[l].f32(), A(kLn2Mean)[l].f32(), A(kLn2Rstd)[l].f32(), N, Cx_,
             C, over_x);
    // attention block, reversed
    std::memset(S(kDAtty), 0, sizeof(float) * N * Cy_);
    std::memset(S(kDQkv), 0, sizeof(float) * N * 3 * Cy_);
    std::memset(dln, 0, sizeof(float) * N * Cx_);
    AXONN_LINEAR(attproj_, backward, S(kDAtty), G(Param::kAttprojw)[l].f32(), G(Param::kAttprojb)[l].f32(),
                 dresidual, A(kAtty)[l].f32(), P(Param::kAttprojw)[l].f32(), gathered, dw_block, N);
    AXONN_OP(attention_backward, S(kDQkv), S(kDAtt), S(kDAtty), A(kQkv)[l].f32(), A(kAtt)[l].f32(), B, T, Cy_, NHy_);
    AXONN_LINEAR(qkv_, backward, dln, G(Param::kQkvw)[l].f32(), G(Param::kQkvb)[l].f32(), S(kDQkv), A(kLn1)[l].f32(),
                 P(Param::kQkvw)[l].f32(), gathered, dw_block, N);
    AXONN_OP(layernorm_backward, dresidual, G(Param::kLn1w)[l].f32(), G(Param::kLn1b)[l].f32(), dln, residual,
             P(Param::kLn1w)[l].f32(), A(kLn1Mean)[l].f32(), A(kLn1Rstd)[l].f32(), N, Cx_, C, over_x);
  }
  AXONN_OP(position_backward, G(Param::kWpe).f32(), dresidual, B, T, Cx_);
  // token embedding: the rows' gradient over all channels (gathered over X; the same on every Y
  // rank), scattered into this rank's vocabulary rows
  const float* demb = full_channels(dresidual, S(kFullA), S(kFullB));
  AXONN_OP(embedding_backward, G(Param::kWte).f32(), demb, in, vocab_begin_, Vr, N, C);
  // the probabilities were overwritten by their gradient: another backward needs another forward
  have_targets_ = false;
}

void Gpt::sync_gradients() {
  ProfileScope scope(profiler_, "sync_gradients");
  for (int i = 0; i < kNumParamTensors; i++) {
    auto p = static_cast<Param>(i);
    Tensor g = grad(p);
    auto n = static_cast<size_t>(g.numel());
    bool weight_shard = p == Param::kQkvw || p == Param::kAttprojw || p == Param::kFcw || p == Param::kFcprojw;
    // weight shards were summed over Z by the backward's reduce-scatter; the rest saw only this
    // Z rank's tokens
    if (!weight_shard) grid_.z().all_reduce(g.f32(), n, DType::kF32);  // over Z
    grid_.data().all_reduce(g.f32(), n, DType::kF32);                   // over data
  }
}

double Gpt::grad_norm() const {
  const parallel::GridShape& g = grid_.shape();
  // How many ranks of one model replica (X*Y*Z) hold the same elements of each tensor.
  auto replicas = [&](Param p) -> double {
    switch (p) {
      case Param::kQkvw: case Param::kAttprojw: case Param::kFcw: case Param::kFcprojw: return 1;
      case Param::kWte: return g.gz;                                   // rows over X*Y
      case Param::kQkvb: case Param::kFcb: return double(g.gx) * g.gz; // output over Y
      default: return double(g.gy) * g.gz;                             // channels over X
    }
  };
  double local = 0.0;
  for (int i = 0; i < kNumParamTensors; i++) {
    auto p = static_cast<Param>(i);
    Tensor t = grad(p);
    local += ops_->sum_squares(t.f32(), t.numel()) / replicas(p);
  }
  // fp32 all-reduce of a double: split into a high and a low part to keep the precision
  float parts[2] = {static_cast<float>(local), static_cast<float>(local - static_cast<float>(local))};
  grid_.xyz().all_reduce(parts, 2, DType::kF32);  // over X*Y*Z
  return std::sqrt(static_cast<double>(parts[0]) + parts[1]);
}

const float* Gpt::output() const { return acts_.tensor(kLogits).f32(); }

double Gpt::flops_per_step() const {
  const double C = config_.channels, L = config_.num_layers, Vp = config_.padded_vocab_size, T = T_;
  const double tokens = static_cast<double>(B_) * T_ * grid_.shape().gz * grid_.shape().gdata;
  // forward per token: 2 FLOPs per weight of the matmuls (12 C^2 per layer, C Vp for the head)
  // plus attention's two T x T products (q k^T and att v), counted in full as is customary
  double fwd_per_token = 2.0 * (12.0 * C * C * L + C * Vp) + 2.0 * 2.0 * T * C * L;
  return 3.0 * fwd_per_token * tokens;
}

}  // namespace axonn::model
