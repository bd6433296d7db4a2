#include "axonn/model/gpt.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "axonn/core/error.hpp"
#include "axonn/core/profiler.hpp"
#include "axonn/model/shard_map.hpp"

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

// Activation tensors kept from the forward for the backward ([L, ...] per layer, [1, ...] under
// recompute except the blocks' outputs kResidual3, which are the next blocks' inputs); shapes local.
enum Act : size_t {
  kEncoded, kLn1, kLn1Mean, kLn1Rstd, kQkv, kAtty, kAtt, kAttproj, kResidual2, kLn2, kLn2Mean, kLn2Rstd,
  kFch, kFchGelu, kFcproj, kResidual3, kLnf, kLnfMean, kLnfRstd, kLnfFull, kLogits, kLosses, kInputs, kTargets,
  kScalars,
};
// Scalars all-reduced by the model (the loss sum, the gradient norm's parts): in device memory they
// need a device word for the communicator; on the host the collectives take the host variables.
constexpr int64_t kNumScalars = 4;
// Backward scratch (gradients of one layer's activations, reused by every layer) and workspaces.
enum Scratch : size_t {
  kDResidual, kDLn, kDAtty, kDQkv, kDFch, kDFchGelu, kDAtt, kFullA, kFullB,
};

// A RowReducer's collective (LayerNorm statistics over X, cross-entropy over X*Y): blocking, traced.
void reduce_over(void* ctx, float* values, int64_t n, bool max) {
  auto* r = static_cast<model::Gpt::Reduction*>(ctx);
  r->tl->all_reduce(*r->group, values, static_cast<size_t>(n), max ? comm::ReduceOp::kMax : comm::ReduceOp::kSum);
}

// Columns [c0, c0 + width) of every row of a [rows, full_width] matrix, into [rows, width], in the
// model's memory.
template <class E>
void copy_columns(const MemoryOps& mem, E* out, const E* in, int64_t rows, int full_width, int c0, int width) {
  const size_t w = sizeof(E) * static_cast<size_t>(width);
  mem.copy_2d(out, w, in + c0, sizeof(E) * static_cast<size_t>(full_width), w, static_cast<size_t>(rows));
}

// The elements of a tensor as the passes' element type E (fp32, or bf16 in mixed precision).
template <class E>
E* ptr(const Tensor& t) {
  if constexpr (std::is_same_v<E, float>)
    return t.f32();
  else
    return t.bf16();
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

// Each kernel call is timed (and traced) under its op name; `k` is the kernels of the pass's precision.
#define AXONN_OP(op, ...)                  \
  do {                                     \
    auto scope_ = tl_.compute(#op);        \
    k.op(__VA_ARGS__);                     \
  } while (0)
// Each tensor-parallel linear (GEMMs, weight all-gather wait and the layer's collectives) as a group
// named after the layer and direction ("fc_ backward").
#define AXONN_LINEAR(layer, direction, ...)                   \
  do {                                                        \
    auto scope_ = tl_.group(#layer " " #direction);           \
    layer.template direction<E>(__VA_ARGS__, linear_run_);    \
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

Gpt::Gpt(GptConfig config, const parallel::Grid& grid, int B, int T, kernels::Backend backend,
         const GptRunOptions& run)
    : config_(checked(config, grid.shape())), grid_(grid), B_(B), T_(T), ops_(&kernels::ops_for(backend)),
      ops_bf16_(run.precision == DType::kBF16 ? &kernels::ops_bf16_for(backend) : nullptr),
      mem_(&memory_for(kernels::backend_device(backend))), run_(run),
      shards_(std::make_unique<ShardMap>(config_, grid.shape(), grid.coords())),
      qkv_(grid, {.in = config.channels, .out = 3 * config.channels, .out_parts = 3}, "qkv"),
      attproj_(grid, {.in = config.channels, .out = config.channels, .transposed = true}, "attproj"),
      fc_(grid, {.in = config.channels, .out = 4 * config.channels}, "fc"),
      fcproj_(grid, {.in = 4 * config.channels, .out = config.channels, .transposed = true}, "fcproj"),
      params_("parameters", mem_->device), grads_("gradients", mem_->device), acts_("activations", mem_->device),
      scratch_("backward scratch", mem_->device), params_bf16_("parameters (bf16 copies)", mem_->device),
      rs_(tl_, run.reduce_scatter_slots, run.overlap.ors, *mem_, ops_), dp_(tl_, *mem_),
      linear_run_{*ops_, tl_, &rs_, run.overlap.oar, ops_bf16_} {
  AXONN_CHECK_ARG(run.precision == DType::kF32 || run.precision == DType::kBF16, "precision ",
                  dtype_name(run.precision), " is not supported; use fp32 or bf16");
  const parallel::GridShape& g = grid.shape();
  const int C = config_.channels, NH = config_.num_heads, L = config_.num_layers;
  AXONN_CHECK_ARG(B > 0, "batch size must be positive, got ", B);
  AXONN_CHECK_ARG(T > 0, "sequence length must be positive, got ", T);
  AXONN_CHECK_ARG(T <= config_.max_seq_len, "sequence length ", T, " exceeds the model's max_seq_len ",
                  config_.max_seq_len, "; use --seq-len <= ", config_.max_seq_len);
  Cx_ = C / g.gx;
  Cy_ = C / g.gy;
  NHy_ = NH / g.gy;
  const int gxy = g.gx * g.gy;
  vocab_begin_ = shards_->vocab_begin();
  vocab_rows_ = shards_->vocab_rows();
  vocab_valid_ = std::max(0, std::min(config_.vocab_size - vocab_begin_, vocab_rows_));
  x_reduction_ = {&tl_, &grid.x()};
  xy_reduction_ = {&tl_, &grid.xy()};
  if (g.gx > 1) x_reducer_ = {reduce_over, &x_reduction_};
  if (gxy > 1) xy_reducer_ = {reduce_over, &xy_reduction_};

  // parameters: this rank's shards (ShardMap's shapes), one slot per llm.c tensor, stacked over layers
  for (int i = 0; i < kNumParamTensors; i++) {
    const auto p = static_cast<Param>(i);
    size_t slot = params_.reserve(param_name(p), shards_->shard_shape(p));
    AXONN_CHECK(slot == static_cast<size_t>(p), "parameter slots out of order");
  }
  grads_ = params_.clone_layout("gradients");
  params_.allocate();
  grads_.allocate();
  const bool bf16 = run_.precision == DType::kBF16;
  if (bf16) {
    params_bf16_ = params_.clone_layout("parameters (bf16 copies)", mem_->device, DType::kBF16);
    params_bf16_.allocate();
  }

  // activations kept for the backward: every block's, or under recompute one block's (slot 0)
  // plus every block's output. Activations are of the model's precision (`act`); row statistics,
  // losses and the attention's probabilities (fp32) or log-sum-exp (bf16, flash-style) are fp32.
  const int64_t N = static_cast<int64_t>(B) * T, L64 = L;
  const int64_t Lk = run_.recompute ? 1 : L64;
  const DType act = run_.precision;
  auto add = [&](Act a, const char* name, Shape s, DType dt) {
    size_t slot = acts_.reserve(name, s, dt);
    AXONN_CHECK(slot == a, "activation slots out of order");
  };
  const DType f32 = DType::kF32;
  add(kEncoded, "encoded", {N, Cx_}, act);
  add(kLn1, "ln1", {Lk, N, Cx_}, act);
  add(kLn1Mean, "ln1_mean", {Lk, N}, f32);
  add(kLn1Rstd, "ln1_rstd", {Lk, N}, f32);
  add(kQkv, "qkv", {Lk, N, 3 * Cy_}, act);
  add(kAtty, "atty", {Lk, N, Cy_}, act);
  if (bf16)
    add(kAtt, "att_lse", {Lk, B, NHy_, T}, f32);
  else
    add(kAtt, "att", {Lk, B, NHy_, T, T}, f32);
  add(kAttproj, "attproj", {Lk, N, Cx_}, act);
  add(kResidual2, "residual2", {Lk, N, Cx_}, act);
  add(kLn2, "ln2", {Lk, N, Cx_}, act);
  add(kLn2Mean, "ln2_mean", {Lk, N}, f32);
  add(kLn2Rstd, "ln2_rstd", {Lk, N}, f32);
  add(kFch, "fch", {Lk, N, 4 * Cy_}, act);
  add(kFchGelu, "fch_gelu", {Lk, N, 4 * Cy_}, act);
  add(kFcproj, "fcproj", {Lk, N, Cx_}, act);
  add(kResidual3, "residual3", {L64, N, Cx_}, act);
  add(kLnf, "lnf", {N, Cx_}, act);
  add(kLnfMean, "lnf_mean", {N}, f32);
  add(kLnfRstd, "lnf_rstd", {N}, f32);
  add(kLnfFull, "lnf_full", {g.gx > 1 ? N : 0, C}, act);  // the LM head's input, all channels
  add(kLogits, "logits", {N, vocab_rows_}, act);
  add(kLosses, "losses", {N}, f32);
  add(kInputs, "inputs", {N}, DType::kI32);
  add(kTargets, "targets", {N}, DType::kI32);
  add(kScalars, "scalars", {on_device() ? kNumScalars : 0}, f32);
  acts_.allocate();
  if (on_device()) host_losses_.resize(static_cast<size_t>(N));

  auto sadd = [&](Scratch s, const char* name, Shape shape, DType dt) {
    size_t slot = scratch_.reserve(name, shape, dt);
    AXONN_CHECK(slot == s, "scratch slots out of order");
  };
  sadd(kDResidual, "dresidual", {N, Cx_}, act);
  sadd(kDLn, "dln", {N, Cx_}, act);
  sadd(kDAtty, "datty", {N, Cy_}, act);
  sadd(kDQkv, "dqkv", {N, 3 * Cy_}, act);
  sadd(kDFch, "dfch", {N, 4 * Cy_}, act);
  sadd(kDFchGelu, "dfch_gelu", {N, 4 * Cy_}, act);
  if (bf16)
    sadd(kDAtt, "attention_d", {B, NHy_, T}, f32);  // the flash backward's rowsum(dout * out)
  else
    sadd(kDAtt, "datt", {B, NHy_, T, T}, f32);
  const bool sharded_channels = gxy > 1;  // embeddings and the head work on all C channels
  sadd(kFullA, "full_a", {sharded_channels ? N : 0, C}, act);
  sadd(kFullB, "full_b", {sharded_channels ? N : 0, C}, act);
  scratch_.allocate();

  // the weight blocks, all-gathered over the second Z communicator in the order the passes use them
  // (in mixed precision the bf16 copies: half the bytes)
  const Arena& read = bf16 ? params_bf16_ : params_;
  std::vector<parallel::WeightGather::Kind> kinds;
  for (int k = 0; k < kNumLinears; k++) {
    const parallel::TpLinearLayout& lay = linear(k).layout();
    kinds.push_back({read.tensor(static_cast<size_t>(weight_param(k))).data(), lay.shard_size, lay.block_size});
  }
  gather_ = std::make_unique<parallel::WeightGather>(tl_, grid.z2(), std::move(kinds), L, run_.overlap.oag,
                                                     run_.cache_gathered_weights, *mem_, act);
}

Gpt::~Gpt() = default;

const parallel::TpLinear& Gpt::linear(int k) const {
  switch (k) {
    case kLinQkv: return qkv_;
    case kLinAttproj: return attproj_;
    case kLinFc: return fc_;
    default: return fcproj_;
  }
}

Param Gpt::weight_param(int k) {
  constexpr Param kWeights[kNumLinears] = {Param::kQkvw, Param::kAttprojw, Param::kFcw, Param::kFcprojw};
  return kWeights[k];
}

size_t Gpt::comm_buffer_bytes() const {
  int64_t largest = 0;
  for (int k = 0; k < kNumLinears; k++) largest = std::max(largest, linear(k).layout().block_size);
  // the reduce-scatter pool: a block and this rank's piece per slot, when Gz > 1
  const size_t pool = grid_.shape().gz > 1
                          ? sizeof(float) * static_cast<size_t>(largest + largest / 2 + 1) *
                                static_cast<size_t>(run_.overlap.ors ? std::max(1, run_.reduce_scatter_slots) : 1)
                          : 0;
  return gather_->bytes() + pool;
}

int64_t Gpt::full_layer_numel(Param p) const { return shards_->full_layer_numel(p); }

int64_t Gpt::global_index(Param p, int64_t j) const { return shards_->global_index(p, j); }

void Gpt::load_full_layer(Param p, int layer, const float* full) {
  weights_updated();
  Tensor t = param(p);
  float* dst = param_is_per_layer(p) ? t[layer].f32() : t.f32();
  int64_t n = param_is_per_layer(p) ? t[layer].numel() : t.numel();
  if (!on_device()) {
    for (int64_t j = 0; j < n; j++) dst[j] = full[global_index(p, j)];
    return;
  }
  // device: the shard is picked out on the host, then uploaded
  std::vector<float> shard(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; j++) shard[static_cast<size_t>(j)] = full[global_index(p, j)];
  mem_->upload(dst, shard.data(), sizeof(float) * static_cast<size_t>(n));
}

void Gpt::init_random(uint64_t seed) {
  weights_updated();
  for (int i = 0; i < kNumParamTensors; i++) {
    auto p = static_cast<Param>(i);
    Tensor t = param(p);
    const int layers = param_is_per_layer(p) ? config_.num_layers : 1;
    const int64_t per_layer = t.numel() / layers, full = full_layer_numel(p);
    // device: computed on the host, then uploaded
    std::vector<float> staged(on_device() ? static_cast<size_t>(t.numel()) : 0);
    float* w = on_device() ? staged.data() : t.f32();
#pragma omp parallel for collapse(2) schedule(static)
    for (int l = 0; l < layers; l++)
      for (int64_t j = 0; j < per_layer; j++)
        w[l * per_layer + j] = gpt2_init_value(config_, p, l * full + global_index(p, j), seed);
    if (on_device()) mem_->upload(t.f32(), staged.data(), t.bytes());
  }
}

// The rows of x_slice [N, C/Gx] with all C channels, gathered over X into `full` ([N, C]);
// `scratch` ([N, C]) receives the all-gather's rank-major blocks. With Gx = 1, x_slice itself.
template <class E>
const E* Gpt::full_channels(const E* x_slice, E* full, E* scratch) {
  comm::Communicator& xg = grid_.x();
  if (xg.size() == 1) return x_slice;
  const int64_t N = static_cast<int64_t>(B_) * T_;
  const int C = config_.channels;
  tl_.all_gather(xg, x_slice, scratch, static_cast<size_t>(N) * Cx_, kernels::Precision<E>::kDType);  // over X
  auto copy = tl_.compute("gather_channels");
  // rank r's block [N, Cx] goes to columns [r Cx, (r+1) Cx) of every row
  const size_t w = sizeof(E) * static_cast<size_t>(Cx_);
  for (int r = 0; r < xg.size(); r++)
    mem_->copy_2d(full + static_cast<int64_t>(r) * Cx_, sizeof(E) * static_cast<size_t>(C),
                  scratch + static_cast<int64_t>(r) * N * Cx_, w, w, static_cast<size_t>(N));
  return full;
}

std::vector<parallel::WeightGather::Use> Gpt::forward_uses() const {
  std::vector<parallel::WeightGather::Use> u;
  for (int l = 0; l < config_.num_layers; l++)
    for (int k = 0; k < kNumLinears; k++) u.push_back({k, l});
  return u;
}

std::vector<parallel::WeightGather::Use> Gpt::backward_uses() const {
  // Blocks in reverse; a recomputed block takes its weights in forward order first. The last block
  // is not recomputed: the forward has just left its activations in the one slot.
  std::vector<parallel::WeightGather::Use> u;
  for (int l = config_.num_layers - 1; l >= 0; l--) {
    if (run_.recompute && l != config_.num_layers - 1)
      for (int k = 0; k < kNumLinears; k++) u.push_back({k, l});
    for (int k = kNumLinears - 1; k >= 0; k--) u.push_back({k, l});
  }
  return u;
}

float Gpt::forward(const int* inputs, const int* targets) {
  return run_.precision == DType::kBF16 ? forward_pass<kernels::bf16>(inputs, targets)
                                        : forward_pass<float>(inputs, targets);
}

template <class E>
float Gpt::forward_pass(const int* inputs, const int* targets) {
  auto scope = tl_.group("forward");
  const auto& k = kernels_of<E>();
  constexpr DType dt = kernels::Precision<E>::kDType;
  const int B = B_, T = T_, C = config_.channels, L = config_.num_layers, V = config_.vocab_size;
  const int Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * T;
  const kernels::RowReducer* over_x = x_reducer_.all_reduce ? &x_reducer_ : nullptr;
  const kernels::RowReducer* over_xy = xy_reducer_.all_reduce ? &xy_reducer_ : nullptr;
  auto P = [&](Param p) { return weight<E>(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return ptr<E>(scratch_.tensor(s)); };

  // the tokens (host memory) are checked here and copied into the model's memory (uploaded on the GPU)
  int* in = static_cast<int*>(A(kInputs).data());
  for (int64_t i = 0; i < N; i++)
    AXONN_CHECK_ARG(inputs[i] >= 0 && inputs[i] < V, "token id ", inputs[i], " at position ", i,
                    " is outside the vocabulary [0, ", V, ")");
  mem_->upload(in, inputs, sizeof(int) * static_cast<size_t>(N));
  have_targets_ = targets != nullptr;
  if (have_targets_) {
    int* tg = static_cast<int*>(A(kTargets).data());
    for (int64_t i = 0; i < N; i++)
      AXONN_CHECK_ARG(targets[i] >= 0 && targets[i] < V, "target id ", targets[i], " at position ", i,
                      " is outside the vocabulary [0, ", V, ")");
    mem_->upload(tg, targets, sizeof(int) * static_cast<size_t>(N));
  }
  // A new step (the optimizer may have changed the weights since the last backward of the last
  // one): no gathered weight block of before may be reused.
  if (!step_open_) {
    gather_->invalidate();
    refresh_bf16_copies();
    step_open_ = true;
  }
  gather_->begin(forward_uses());

  // token embedding, vocabulary-parallel: each rank of X*Y looks up the tokens among its rows
  // (zeros for the others); the all-reduce completes every row; this rank keeps its X channels
  E* encoded = ptr<E>(A(kEncoded));
  if (grid_.xy().size() == 1) {
    AXONN_OP(embedding_forward, encoded, in, ptr<E>(P(Param::kWte)), vocab_begin_, Vr, N, C);
  } else {
    E* emb = S(kFullA);
    AXONN_OP(embedding_forward, emb, in, ptr<E>(P(Param::kWte)), vocab_begin_, Vr, N, C);
    tl_.all_reduce(grid_.xy(), emb, static_cast<size_t>(N) * C, dt);  // over X*Y (one non-zero term: exact)
    auto copy = tl_.compute("copy_columns");
    copy_columns(*mem_, encoded, emb, N, C, grid_.coords().x * Cx_, Cx_);
  }
  AXONN_OP(position_forward, encoded, ptr<E>(P(Param::kWpe)), B, T, Cx_);

  for (int l = 0; l < L; l++) forward_block<E>(l);

  E* lnf = ptr<E>(A(kLnf));
  AXONN_OP(layernorm_forward, lnf, A(kLnfMean).f32(), A(kLnfRstd).f32(), ptr<E>(A(kResidual3)[L - 1]),
           ptr<E>(P(Param::kLnfw)), ptr<E>(P(Param::kLnfb)), N, Cx_, C, over_x);
  // LM head, tied to the token embedding: all channels of lnf (gathered over X) against this
  // rank's vocabulary rows
  const E* lnf_full = full_channels<E>(lnf, ptr<E>(A(kLnfFull)), S(kFullB));
  E* logits = ptr<E>(A(kLogits));
  AXONN_OP(matmul_forward, logits, lnf_full, ptr<E>(P(Param::kWte)), nullptr, N, C, Vr);
  if (!have_targets_) return std::numeric_limits<float>::quiet_NaN();
  // vocabulary-parallel softmax + cross-entropy over X*Y; probabilities overwrite the logits
  float* losses = A(kLosses).f32();
  AXONN_OP(softmax_crossentropy_forward, losses, logits, logits, static_cast<int*>(A(kTargets).data()), N,
           vocab_valid_, Vr, vocab_begin_, over_xy);
  // the mean over the global batch: this rank's tokens are summed (on the host, in order: the same
  // sum on every backend), then over Z and data
  const float* host_losses = losses;
  if (on_device()) {
    mem_->download(host_losses_.data(), losses, sizeof(float) * static_cast<size_t>(N));
    host_losses = host_losses_.data();
  }
  double local = 0.0;
  for (int64_t i = 0; i < N; i++) local += host_losses[i];
  float sum = static_cast<float>(local);
  all_reduce_scalars(grid_.z(), &sum, 1);     // over Z
  all_reduce_scalars(grid_.data(), &sum, 1);  // over data
  const double global_tokens = static_cast<double>(N) * grid_.shape().gz * grid_.shape().gdata;
  return static_cast<float>(sum / global_tokens);
}

// One transformer block, forward: from its input (the previous block's output) to its output
// kResidual3[l]; the intermediate activations go to slot(l). Run by the forward and, under
// recompute, again by the backward (with the same collectives: the same results).
template <class E>
void Gpt::forward_block(int l) {
  auto scope = tl_.group("block forward");
  const auto& k = kernels_of<E>();
  const int B = B_, T = T_, C = config_.channels;
  const int64_t N = static_cast<int64_t>(B) * T;
  const kernels::RowReducer* over_x = x_reducer_.all_reduce ? &x_reducer_ : nullptr;
  auto P = [&](Param p) { return weight<E>(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto W = [&](int kind) { return static_cast<const E*>(gather_->take(kind, l)); };
  const int a = slot(l);
  const E* residual = l == 0 ? ptr<E>(A(kEncoded)) : ptr<E>(A(kResidual3)[l - 1]);
  E* ln1 = ptr<E>(A(kLn1)[a]);
  E* qkv = ptr<E>(A(kQkv)[a]);
  E* atty = ptr<E>(A(kAtty)[a]);
  E* attproj = ptr<E>(A(kAttproj)[a]);
  E* residual2 = ptr<E>(A(kResidual2)[a]);
  E* ln2 = ptr<E>(A(kLn2)[a]);
  E* fch = ptr<E>(A(kFch)[a]);
  E* fch_gelu = ptr<E>(A(kFchGelu)[a]);
  E* fcproj = ptr<E>(A(kFcproj)[a]);
  // Each linear takes its weight block from the WeightGather: it waits for the block's all-gather
  // over Z (issued one linear earlier under OAG, else now) and issues the next linear's.
  // attention block: LayerNorm (statistics over X) -> QKV (A) -> attention on this rank's heads -> proj (B)
  AXONN_OP(layernorm_forward, ln1, A(kLn1Mean)[a].f32(), A(kLn1Rstd)[a].f32(), residual, ptr<E>(P(Param::kLn1w)[l]),
           ptr<E>(P(Param::kLn1b)[l]), N, Cx_, C, over_x);
  AXONN_LINEAR(qkv_, forward, qkv, ln1, W(kLinQkv), ptr<E>(P(Param::kQkvb)[l]), N);
  // fp32: keeps the probabilities att [B, NH, T, T]; bf16 (flash): keeps their log-sum-exp [B, NH, T]
  AXONN_OP(attention_forward, atty, A(kAtt)[a].f32(), qkv, B, T, Cy_, NHy_);
  AXONN_LINEAR(attproj_, forward, attproj, atty, W(kLinAttproj), ptr<E>(P(Param::kAttprojb)[l]), N);
  AXONN_OP(residual_forward, residual2, residual, attproj, N * Cx_);
  // MLP block: LayerNorm -> FC (A) -> GELU on this rank's 4C/Gy -> FC2 (B)
  AXONN_OP(layernorm_forward, ln2, A(kLn2Mean)[a].f32(), A(kLn2Rstd)[a].f32(), residual2, ptr<E>(P(Param::kLn2w)[l]),
           ptr<E>(P(Param::kLn2b)[l]), N, Cx_, C, over_x);
  AXONN_LINEAR(fc_, forward, fch, ln2, W(kLinFc), ptr<E>(P(Param::kFcb)[l]), N);
  AXONN_OP(gelu_forward, fch_gelu, fch, N * 4 * Cy_);
  AXONN_LINEAR(fcproj_, forward, fcproj, fch_gelu, W(kLinFcproj), ptr<E>(P(Param::kFcprojb)[l]), N);
  AXONN_OP(residual_forward, ptr<E>(A(kResidual3)[l]), residual2, fcproj, N * Cx_);
}

void Gpt::backward(const BackwardOptions& options) {
  AXONN_CHECK(have_targets_, "backward() needs a forward() with targets");
  AXONN_CHECK(!dp_.pending() && !dp_armed_,
              "backward() after the step's last backward: call sync_gradients() (and the optimizer) first");
  if (run_.precision == DType::kBF16)
    backward_pass<kernels::bf16>(options);
  else
    backward_pass<float>(options);
}

template <class E>
void Gpt::backward_pass(const BackwardOptions& options) {
  auto scope = tl_.group("backward");
  const auto& k = kernels_of<E>();
  constexpr DType dt = kernels::Precision<E>::kDType;
  const int B = B_, T = T_, C = config_.channels, L = config_.num_layers, Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * T;
  const bool last = options.last_micro_batch;
  const kernels::RowReducer* over_x = x_reducer_.all_reduce ? &x_reducer_ : nullptr;
  auto P = [&](Param p) { return weight<E>(p); };
  auto G = [&](Param p) { return grad(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return ptr<E>(scratch_.tensor(s)); };
  const int* in = static_cast<const int*>(A(kInputs).data());
  {
    auto zero = tl_.compute("zero_scratch");
    scratch_.zero();
  }
  // DP overlap: the gradient sums over data and Z·data are issued in this backward as each tensor's
  // gradient becomes final, which is only in the step's last micro-batch.
  dp_armed_ = run_.overlap.dp && last;
  gather_->begin(backward_uses());

  // The residual stream's gradient is accumulated in one buffer (dresidual): a residual add
  // passes its output gradient unchanged to both inputs, so the branch reads dresidual as its
  // output gradient and the LayerNorm at the branch's start adds its input gradient back into it.
  E* dresidual = S(kDResidual);
  E* dln = S(kDLn);

  // d logits, in place over the probabilities: the loss is loss_scale * the mean over the global
  // batch (micro-batches: the mean over the whole step)
  const double global_tokens = static_cast<double>(N) * grid_.shape().gz * grid_.shape().gdata;
  E* dlogits = ptr<E>(A(kLogits));
  AXONN_OP(softmax_crossentropy_backward, dlogits, dlogits, static_cast<const int*>(A(kTargets).data()),
           static_cast<float>(options.loss_scale / global_tokens), N, vocab_valid_, Vr, vocab_begin_);
  // LM head: d lnf over all channels is partial over X*Y (each rank has its vocabulary rows):
  // all-reduced over X*Y, then this rank keeps its X channels
  const E* lnf_full = grid_.x().size() == 1 ? ptr<E>(A(kLnf)) : ptr<E>(A(kLnfFull));
  if (grid_.xy().size() == 1) {
    AXONN_OP(matmul_backward, dln, G(Param::kWte).f32(), nullptr, dlogits, lnf_full, ptr<E>(P(Param::kWte)), N, C,
             Vr);
  } else {
    E* dfull = S(kFullA);
    AXONN_OP(matmul_backward, dfull, G(Param::kWte).f32(), nullptr, dlogits, lnf_full, ptr<E>(P(Param::kWte)), N, C,
             Vr);
    tl_.all_reduce(grid_.xy(), dfull, static_cast<size_t>(N) * C, dt);  // over X*Y
    auto copy = tl_.compute("copy_columns");
    copy_columns(*mem_, dln, dfull, N, C, grid_.coords().x * Cx_, Cx_);
  }
  AXONN_OP(layernorm_backward, dresidual, G(Param::kLnfw).f32(), G(Param::kLnfb).f32(), dln,
           ptr<E>(A(kResidual3)[L - 1]), ptr<E>(P(Param::kLnfw)), A(kLnfMean).f32(), A(kLnfRstd).f32(), N, Cx_, C,
           over_x);
  if (dp_armed_) issue_head_grads();  // over Z·data: the final norm's gradient is complete

  for (int l = L - 1; l >= 0; l--) {
    // recompute: the block's activations again, from its kept input (the last block's are still there)
    if (run_.recompute && l != L - 1) forward_block<E>(l);
    backward_block<E>(l, last);
  }
  AXONN_OP(position_backward, G(Param::kWpe).f32(), dresidual, B, T, Cx_);
  // token embedding: the rows' gradient over all channels (gathered over X; the same on every Y
  // rank), scattered into this rank's vocabulary rows
  const E* demb = full_channels<E>(dresidual, S(kFullA), S(kFullB));
  AXONN_OP(embedding_backward, G(Param::kWte).f32(), demb, in, vocab_begin_, Vr, N, C);
  if (dp_armed_) issue_embedding_grads();  // over Z·data
  // the probabilities were overwritten by their gradient: another backward needs another forward
  have_targets_ = false;
  // the step's weights may change now: the next forward gathers them afresh
  if (last) step_open_ = false;
}

// One transformer block, backward, in exact reverse of forward_block. Reads the block's activations
// from slot(l); accumulates the parameter gradients of layer l.
template <class E>
void Gpt::backward_block(int l, bool last) {
  auto scope = tl_.group("block backward");
  const auto& k = kernels_of<E>();
  const int B = B_, T = T_, C = config_.channels;
  const int64_t N = static_cast<int64_t>(B) * T;
  const kernels::RowReducer* over_x = x_reducer_.all_reduce ? &x_reducer_ : nullptr;
  auto P = [&](Param p) { return weight<E>(p); };
  auto G = [&](Param p) { return grad(p); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return ptr<E>(scratch_.tensor(s)); };
  auto W = [&](int kind) { return static_cast<const E*>(gather_->take(kind, l)); };
  const int a = slot(l);
  const E* residual = l == 0 ? ptr<E>(A(kEncoded)) : ptr<E>(A(kResidual3)[l - 1]);
  E* dresidual = S(kDResidual);
  E* dln = S(kDLn);
  // Each linear's backward: dx all-reduced over its output group (overlapped with the dW GEMM under
  // OAR), dW reduce-scattered over Z (retired later under ORS); after each, the weight shards whose
  // gradient became complete are summed over data (DP overlap).
  // MLP block, reversed
  const size_t e = sizeof(E);
  mem_->zero(S(kDFchGelu), e * N * 4 * Cy_);
  mem_->zero(S(kDFch), e * N * 4 * Cy_);
  mem_->zero(dln, e * N * Cx_);
  AXONN_LINEAR(fcproj_, backward, S(kDFchGelu), G(Param::kFcprojw)[l].f32(), G(Param::kFcprojb)[l].f32(), dresidual,
               ptr<E>(A(kFchGelu)[a]), W(kLinFcproj), N, shard_tag(kLinFcproj, l, last));
  issue_final_weight_grads();
  AXONN_OP(gelu_backward, S(kDFch), ptr<E>(A(kFch)[a]), S(kDFchGelu), N * 4 * Cy_);
  AXONN_LINEAR(fc_, backward, dln, G(Param::kFcw)[l].f32(), G(Param::kFcb)[l].f32(), S(kDFch), ptr<E>(A(kLn2)[a]),
               W(kLinFc), N, shard_tag(kLinFc, l, last));
  issue_final_weight_grads();
  AXONN_OP(layernorm_backward, dresidual, G(Param::kLn2w)[l].f32(), G(Param::kLn2b)[l].f32(), dln,
           ptr<E>(A(kResidual2)[a]), ptr<E>(P(Param::kLn2w)[l]), A(kLn2Mean)[a].f32(), A(kLn2Rstd)[a].f32(), N, Cx_,
           C, over_x);
  // attention block, reversed
  mem_->zero(S(kDAtty), e * N * Cy_);
  mem_->zero(S(kDQkv), e * N * 3 * Cy_);
  mem_->zero(dln, e * N * Cx_);
  AXONN_LINEAR(attproj_, backward, S(kDAtty), G(Param::kAttprojw)[l].f32(), G(Param::kAttprojb)[l].f32(), dresidual,
               ptr<E>(A(kAtty)[a]), W(kLinAttproj), N, shard_tag(kLinAttproj, l, last));
  issue_final_weight_grads();
  // fp32: scratch receives d att [B, NH, T, T]; bf16 (flash): D = rowsum(dout * out) [B, NH, T], and the
  // backward reads the forward's output (atty) and log-sum-exp
  if constexpr (std::is_same_v<E, float>) {
    AXONN_OP(attention_backward, S(kDQkv), scratch_.tensor(kDAtt).f32(), S(kDAtty), ptr<E>(A(kQkv)[a]),
             A(kAtt)[a].f32(), B, T, Cy_, NHy_);
  } else {
    AXONN_OP(attention_backward, S(kDQkv), scratch_.tensor(kDAtt).f32(), S(kDAtty), ptr<E>(A(kQkv)[a]),
             ptr<E>(A(kAtty)[a]), A(kAtt)[a].f32(), B, T, Cy_, NHy_);
  }
  AXONN_LINEAR(qkv_, backward, dln, G(Param::kQkvw)[l].f32(), G(Param::kQkvb)[l].f32(), S(kDQkv), ptr<E>(A(kLn1)[a]),
               W(kLinQkv), N, shard_tag(kLinQkv, l, last));
  issue_final_weight_grads();
  AXONN_OP(layernorm_backward, dresidual, G(Param::kLn1w)[l].f32(), G(Param::kLn1b)[l].f32(), dln, residual,
           ptr<E>(P(Param::kLn1w)[l]), A(kLn1Mean)[a].f32(), A(kLn1Rstd)[a].f32(), N, Cx_, C, over_x);
  if (dp_armed_) issue_layer_grads(l);  // over Z·data: the block's norms and biases are complete
}

// --- the gradient sync: the same buckets, in the same order per communicator, whether issued during
// the backward (DP overlap) or by sync_gradients(); so the sums are the same bits.
//   Z·data: final norm | block L-1's norms and biases | ... | block 0's | wpe | wte
//   data:   weight shards in backward order (block L-1: fcproj, fc, attproj, qkv; ...; block 0)
// Weight shards were summed over Z by their reduce-scatters; every other tensor saw only this Z
// rank's tokens, hence Z·data.

void Gpt::issue_shard_grad(int k, int l) {
  Tensor g = grad(weight_param(k))[l];
  dp_.issue(grid_.data(), {{g.f32(), g.numel()}});  // over data
}

void Gpt::issue_final_weight_grads() {
  // the retired reduce-scatters, oldest first; only the last micro-batch's make a shard final
  for (int tag : rs_.take_retired()) {
    if (!dp_armed_ || tag % 2 == 0) continue;
    const int id = tag / 2;
    issue_shard_grad(id % kNumLinears, id / kNumLinears);
  }
}

void Gpt::issue_layer_grads(int l) {
  std::vector<parallel::GradAllReduce::Part> parts;
  for (Param p : {Param::kLn1w, Param::kLn1b, Param::kQkvb, Param::kAttprojb, Param::kLn2w, Param::kLn2b,
                  Param::kFcb, Param::kFcprojb}) {
    Tensor g = grad(p)[l];
    parts.push_back({g.f32(), g.numel()});
  }
  dp_.issue(grid_.zdata(), parts);  // over Z·data, one packed bucket
}

void Gpt::issue_head_grads() {
  Tensor w = grad(Param::kLnfw), b = grad(Param::kLnfb);
  dp_.issue(grid_.zdata(), {{w.f32(), w.numel()}, {b.f32(), b.numel()}});  // over Z·data
}

void Gpt::issue_embedding_grads() {
  Tensor wpe = grad(Param::kWpe), wte = grad(Param::kWte);
  dp_.issue(grid_.zdata(), {{wpe.f32(), wpe.numel()}});  // over Z·data, in place
  dp_.issue(grid_.zdata(), {{wte.f32(), wte.numel()}});  // over Z·data, in place
}

void Gpt::sync_gradients() {
  auto scope = tl_.group("sync_gradients");
  // the weight-gradient reduce-scatters still in flight (ORS): accumulated into the shards first,
  // before anything reads or sums the gradients
  rs_.drain();
  if (dp_armed_) {
    // DP overlap: everything else was issued during the backward; the shards just completed now
    issue_final_weight_grads();
  } else {
    // no DP overlap: the same buckets in the same order, each completed before the next is packed
    (void)rs_.take_retired();
    issue_head_grads();
    dp_.wait_all();
    for (int l = config_.num_layers - 1; l >= 0; l--) {
      for (int k = kNumLinears - 1; k >= 0; k--) {
        issue_shard_grad(k, l);
        dp_.wait_all();
      }
      issue_layer_grads(l);
      dp_.wait_all();
    }
    issue_embedding_grads();
  }
  dp_.wait_all();
  dp_armed_ = false;
}

void Gpt::zero_grad() {
  // A reduce-scatter retired after the zeroing would add the old step's gradient to the new one.
  rs_.drain();
  (void)rs_.take_retired();
  AXONN_CHECK(!dp_.pending(), "zero_grad() while gradient sums are in flight: call sync_gradients() first");
  dp_armed_ = false;
  grads_.zero();
}

void Gpt::weights_updated() {
  gather_->invalidate();
  step_open_ = false;
}

double Gpt::grad_norm() const {
  AXONN_CHECK(rs_.empty() && !dp_.pending(), "grad_norm() before sync_gradients(): gradients are incomplete");
  auto scope = tl_.group("grad_norm");
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
  {
    auto sums = tl_.compute("sum_squares");
    for (int i = 0; i < kNumParamTensors; i++) {
      auto p = static_cast<Param>(i);
      Tensor t = grad(p);
      local += ops_->sum_squares(t.f32(), t.numel()) / replicas(p);
    }
  }
  // fp32 all-reduce of a double: split into a high and a low part to keep the precision
  float parts[2] = {static_cast<float>(local), static_cast<float>(local - static_cast<float>(local))};
  all_reduce_scalars(grid_.xyz(), parts, 2);  // over X*Y*Z
  return std::sqrt(static_cast<double>(parts[0]) + parts[1]);
}

Tensor Gpt::output() const { return acts_.tensor(kLogits); }

template <class E>
const typename kernels::Precision<E>::Table& Gpt::kernels_of() const {
  if constexpr (std::is_same_v<E, float>)
    return *ops_;
  else
    return *ops_bf16_;
}

template <class E>
Tensor Gpt::weight(Param p) const {
  if constexpr (std::is_same_v<E, float>)
    return param(p);
  else
    return params_bf16_.tensor(static_cast<size_t>(p));
}

void Gpt::refresh_bf16_copies() {
  if (run_.precision != DType::kBF16) return;
  auto scope = tl_.compute("cast_to_bf16");
  for (size_t i = 0; i < params_.size(); i++) {
    Tensor master = params_.tensor(i);
    ops_bf16_->cast_to_bf16(params_bf16_.tensor(i).bf16(), master.f32(), master.numel());
  }
}

void Gpt::all_reduce_scalars(comm::Communicator& group, float* values, int64_t n) const {
  AXONN_CHECK(n <= kNumScalars, "all_reduce_scalars of ", n, " values");
  if (!on_device()) {
    tl_.all_reduce(group, values, static_cast<size_t>(n));
    return;
  }
  if (group.size() == 1) return;  // nothing to sum (and no round trip through the device)
  float* word = acts_.tensor(kScalars).f32();
  mem_->upload(word, values, sizeof(float) * static_cast<size_t>(n));
  tl_.all_reduce(group, word, static_cast<size_t>(n));
  mem_->download(values, word, sizeof(float) * static_cast<size_t>(n));
}

double Gpt::flops_per_step() const {
  const double C = config_.channels, L = config_.num_layers, Vp = config_.padded_vocab_size, T = T_;
  const double tokens = static_cast<double>(B_) * T_ * grid_.shape().gz * grid_.shape().gdata;
  // forward per token: 2 FLOPs per weight of the matmuls (12 C^2 per layer, C Vp for the head)
  // plus attention's two T x T products (q k^T and att v), counted in full as is customary
  double fwd_per_token = 2.0 * (12.0 * C * C * L + C * Vp) + 2.0 * 2.0 * T * C * L;
  return 3.0 * fwd_per_token * tokens;
}

}  // namespace axonn::model
