// The model's step: token embedding, the blocks, the final norm, the LM head and the loss, forward and
// backward, straight-line; the blocks themselves are src/model/gpt2_block.cpp and llama_block.cpp, the
// gradient sums src/model/grad_sync.cpp. Everything about the tensors comes from model/spec.hpp.
#include "axonn/model/gpt.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/core/profiler.hpp"
#include "axonn/core/random.hpp"
#include "axonn/model/shard_map.hpp"
#include "block.hpp"
#include "grad_sync.hpp"

namespace axonn::model {

using detail::ptr;

namespace {

// --- counter-based normal samples: splitmix64 of (seed, tensor, index) -> Box-Muller ----------
float normal_at(uint64_t seed, uint64_t tensor, uint64_t index) {
  uint64_t r = splitmix64(splitmix64(seed ^ splitmix64(tensor + 0x1234567ull)) + index);
  // two 24-bit uniforms in (0, 1]
  double u1 = (static_cast<double>(r >> 40) + 1.0) / 16777216.0;
  double u2 = static_cast<double>((r >> 16) & 0xFFFFFF) / 16777216.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

// The model's own activations (the blocks keep theirs): the embedding's output, the residual stream
// after each block (the next block's input; kept under recompute too), the final norm, the logits.
enum Act : size_t {
  kEncoded, kStream, kLnf, kLnfMean, kLnfRstd, kLnfFull, kLogits, kLosses, kInputs, kTargets, kScalars,
  kLossWeights,  // a masked loss's per-token weights (1 kept, 0 dropped), read by the cross-entropy's backward
  kDLnfFull,     // a training forward's d lnf over all channels (partial over X*Y), for the backward
  kHeadRowValues,  // the cross-entropy's row values of one chunk, completed over X*Y: [max | sum of exp | target logit]
};
// Scalars all-reduced by the model (the loss sum, the gradient norm's parts): in device memory they
// need a device word for the communicator; on the host the collectives take the host variables.
constexpr int64_t kNumScalars = 4;
// The backward's scratch: the residual stream's gradient, the final norm's, the full-channel rows of
// the embedding and the head, the final norm's backward row sums (all-reduced over X).
enum Scratch : size_t { kDResidual, kDLn, kFullA, kFullB, kNormSums };

// Each counted target's d loss when the loss is loss_scale * the mean over `counted` targets (none: 0).
float loss_gradient_per_target(double loss_scale, double counted) {
  return counted > 0 ? static_cast<float>(loss_scale / counted) : 0.0f;
}

// Columns [c0, c0 + width) of every row of a [rows, full_width] matrix, into [rows, width], in the
// model's memory.
template <class E>
void copy_columns(const MemoryOps& mem, E* out, const E* in, int64_t rows, int full_width, int c0, int width) {
  const size_t w = sizeof(E) * static_cast<size_t>(width);
  mem.copy_2d(out, w, in + c0, sizeof(E) * static_cast<size_t>(full_width), w, static_cast<size_t>(rows));
}

// An inference model in bf16 keeps the bf16 weights only: nothing updates them, so no fp32 masters.
bool fp32_weights_kept(const GptRunOptions& run) { return !(run.inference && run.precision == DType::kBF16); }

// Rows of the LM head at a time (GptRunOptions::lm_head_chunk; all: the N rows).
int64_t head_rows(int64_t N, const GptRunOptions& run) {
  AXONN_CHECK_ARG(run.lm_head_chunk >= 0, "the LM head's chunk must be >= 0 rows (0: all at once), got ",
                  run.lm_head_chunk);
  return run.lm_head_chunk > 0 ? std::min<int64_t>(N, run.lm_head_chunk) : N;
}

// The model's own arenas (the blocks reserve theirs), reserved, not allocated: the constructor allocates
// them, Gpt::memory_need counts them. N = B*T rows; device: the arenas are in device memory.
void reserve_model(const ModelSpec& spec, const ShardMap& shards, const parallel::GridShape& g, int64_t N,
                   const GptRunOptions& run, bool device, Arena& params, Arena& grads, Arena& params_bf16,
                   Arena& acts, Arena& scratch) {
  // parameters: this rank's shards (ShardMap's shapes), one slot per tensor of the spec
  for (int i = 0; i < static_cast<int>(spec.params.size()); i++) {
    size_t slot = params.reserve(spec.params[static_cast<size_t>(i)].name, shards.shard_shape(i));
    AXONN_CHECK(slot == static_cast<size_t>(i), "parameter slots out of order");
  }
  if (!run.inference) grads = params.clone_layout("gradients");  // inference: none
  if (run.precision == DType::kBF16)
    params_bf16 = params.clone_layout("parameters (bf16 copies)", params.device(), DType::kBF16);

  // the model's activations, of its precision (`act`); row statistics and losses fp32
  const int C = spec.config.channels, Cx = C / g.gx, gxy = g.gx * g.gy;
  const int64_t L = spec.config.num_layers, rows = head_rows(N, run);
  const DType act = run.precision, f32 = DType::kF32;
  const bool layernorm = spec.norm == Norm::kLayerNorm;
  auto add = [&](Act a, const char* name, Shape s, DType dt) { detail::reserve_slot(acts, a, name, s, dt); };
  add(kEncoded, "encoded", {N, Cx}, act);
  add(kStream, "residual3", {L, N, Cx}, act);
  add(kLnf, "lnf", {N, Cx}, act);
  add(kLnfMean, "lnf_mean", {layernorm ? N : 0}, f32);
  add(kLnfRstd, "lnf_rstd", {N}, f32);
  add(kLnfFull, "lnf_full", {g.gx > 1 ? N : 0, C}, act);  // the LM head's input, all channels
  add(kLogits, "logits", {rows, shards.vocab_rows()}, act);  // one chunk of rows' (all rows without chunks)
  add(kLosses, "losses", {N}, f32);
  add(kInputs, "inputs", {N}, DType::kI32);
  add(kTargets, "targets", {N}, DType::kI32);
  add(kScalars, "scalars", {device ? kNumScalars : 0}, f32);
  add(kLossWeights, "loss_weights", {N}, f32);
  add(kDLnfFull, "dlnf_full", {N, C}, act);
  add(kHeadRowValues, "head_row_values", {3 * rows}, f32);

  auto sadd = [&](Scratch s, const char* name, Shape shape, DType dt) { detail::reserve_slot(scratch, s, name, shape, dt); };
  sadd(kDResidual, "dresidual", {N, Cx}, act);
  sadd(kDLn, "dln", {gxy > 1 ? N : 0, Cx}, act);  // d lnf, this rank's X channels (X*Y = 1: kDLnfFull)
  const bool sharded_channels = gxy > 1;  // embeddings and the head work on all C channels
  sadd(kFullA, "full_a", {sharded_channels ? N : 0, C}, act);
  sadd(kFullB, "full_b", {sharded_channels ? N : 0, C}, act);
  // the final norm's backward row sums over X: LayerNorm's sum(dnorm) | sum(dnorm * xhat), RMSNorm's dot
  sadd(kNormSums, "norm_row_sums", {layernorm ? 2 * N : N}, f32);
}

// The communication buffers at their largest: the weight blocks gathered over Z (WeightGather) and the
// reduce-scatter pool, a block and this rank's piece per slot, when Gz > 1.
size_t comm_buffer_need(const ModelSpec& spec, const ShardMap& shards, const parallel::GridShape& g,
                        const GptRunOptions& run) {
  std::vector<int64_t> blocks;
  for (int k = 0; k < static_cast<int>(spec.linears.size()); k++) blocks.push_back(shards.linear_layout(k).block_size);
  const int64_t largest = blocks.empty() ? 0 : *std::max_element(blocks.begin(), blocks.end());
  const size_t pool = g.gz > 1 ? sizeof(float) * static_cast<size_t>(largest + largest / 2 + 1) *
                                     static_cast<size_t>(run.overlap.ors ? std::max(1, run.reduce_scatter_slots) : 1)
                               : 0;
  return parallel::WeightGather::bytes_for(blocks, spec.config.num_layers, g.gz, run.cache_gathered_weights,
                                           run.precision) +
         pool;
}

}  // namespace

// Each kernel call is timed (and traced) under its op name (block.hpp's AXONN_OP: `tl`, `k`).

float init_value(const ModelSpec& spec, int t, int64_t index, uint64_t seed) {
  const ParamSpec& p = spec.params[static_cast<size_t>(t)];
  switch (p.init.kind) {
    case InitSpec::kOnes: return 1.0f;
    case InitSpec::kZeros: return 0.0f;
    case InitSpec::kNormal:
      // padded vocabulary rows stay zero: they are never a target
      if (p.role == Role::kVocab && index >= static_cast<int64_t>(spec.config.vocab_size) * spec.config.channels)
        return 0.0f;
      return p.init.std * normal_at(seed, static_cast<uint64_t>(t), static_cast<uint64_t>(index));
  }
  return 0.0f;
}

void init_params(Arena& params, const ModelSpec& spec, uint64_t seed) {
  for (int i = 0; i < static_cast<int>(spec.params.size()); i++) {
    Tensor t = params.tensor(static_cast<size_t>(i));
    float* w = t.f32();
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < t.numel(); j++) w[j] = init_value(spec, i, j, seed);
  }
}

Gpt::Gpt(GptConfig config, const parallel::Grid& grid, int B, int T, kernels::Backend backend,
         const GptRunOptions& run)
    : spec_(model_spec(config)), grid_(grid), B_(B), T_(T), ops_(&kernels::ops_for(backend)),
      ops_bf16_(run.precision == DType::kBF16 ? &kernels::ops_bf16_for(backend) : nullptr),
      mem_(&memory_for(kernels::backend_device(backend))), run_(run),
      shards_(std::make_unique<ShardMap>(spec_, grid.shape(), grid.coords())),
      params_("parameters", mem_->device), grads_("gradients", mem_->device), acts_("activations", mem_->device),
      scratch_("backward scratch", mem_->device), params_bf16_("parameters (bf16 copies)", mem_->device),
      rs_(tl_, run.reduce_scatter_slots, run.overlap.ors, *mem_, ops_),
      sync_(std::make_unique<detail::GradientSync>(spec_, grid, tl_, *mem_, grads_, rs_)),
      linear_run_{*ops_, tl_, &rs_, run.overlap.oar, ops_bf16_} {
  AXONN_CHECK_ARG(run.precision == DType::kF32 || run.precision == DType::kBF16, "precision ",
                  dtype_name(run.precision), " is not supported; use fp32 or bf16");
  const parallel::GridShape& g = grid.shape();
  const GptConfig& c = spec_.config;
  const int C = c.channels, L = c.num_layers;
  AXONN_CHECK_ARG(B > 0, "batch size must be positive, got ", B);
  AXONN_CHECK_ARG(T > 0, "sequence length must be positive, got ", T);
  AXONN_CHECK_ARG(T <= c.max_seq_len, "sequence length ", T, " exceeds the model's max_seq_len ", c.max_seq_len,
                  "; use --seq-len <= ", c.max_seq_len);
  Cx_ = C / g.gx;
  vocab_begin_ = shards_->vocab_begin();
  vocab_rows_ = shards_->vocab_rows();
  vocab_valid_ = std::max(0, std::min(c.vocab_size - vocab_begin_, vocab_rows_));

  const int64_t N = static_cast<int64_t>(B) * T;
  head_rows_ = head_rows(N, run_);
  reserve_model(spec_, *shards_, g, N, run_, on_device(), params_, grads_, params_bf16_, acts_, scratch_);
  if (fp32_weights_kept(run_)) params_.allocate();
  grads_.allocate();
  const bool bf16 = run_.precision == DType::kBF16;
  if (bf16) params_bf16_.allocate();
  acts_.allocate();
  scratch_.allocate();
  if (on_device()) host_losses_.resize(static_cast<size_t>(N));

  // what the blocks share, and the blocks of the model's kind
  ctx_ = std::make_unique<detail::PassContext>(detail::PassContext{
      spec_, *shards_, grid, tl_, *mem_, *ops_, ops_bf16_, params_, params_bf16_, grads_, linear_run_, *sync_});
  ctx_->B = B;
  ctx_->T = T;
  ctx_->N = N;
  ctx_->Cx = Cx_;
  ctx_->recompute = run_.recompute;
  if (c.family == Family::kLlama)
    llama_ = std::make_unique<detail::LlamaBlock>(*ctx_);
  else
    gpt2_ = std::make_unique<detail::Gpt2Block>(*ctx_);

  // the weight blocks, all-gathered over the second Z communicator in the order the passes use them
  // (in mixed precision the bf16 copies: half the bytes)
  const Arena& read = bf16 ? params_bf16_ : params_;
  std::vector<parallel::WeightGather::Kind> kinds;
  for (int k = 0; k < static_cast<int>(spec_.linears.size()); k++) {
    const parallel::TpLinearLayout& lay = shards_->linear_layout(k);
    kinds.push_back(
        {read.tensor(static_cast<size_t>(spec_.linears[static_cast<size_t>(k)].weight)).data(), lay.shard_size,
         lay.block_size});
  }
  gather_ = std::make_unique<parallel::WeightGather>(tl_, grid.z2(), std::move(kinds), L, run_.overlap.oag,
                                                     run_.cache_gathered_weights, *mem_, run_.precision);
  ctx_->gather = gather_.get();
}

Gpt::~Gpt() = default;

std::vector<bool> Gpt::decay_mask(bool decay_all) const {
  std::vector<bool> decay;
  for (const ParamSpec& p : spec_.params) decay.push_back(decay_all || p.decay);
  return decay;
}

size_t Gpt::activation_bytes() const {
  return acts_.bytes() + scratch_.bytes() + (gpt2_ ? gpt2_->activation_bytes() : llama_->activation_bytes());
}

size_t Gpt::comm_buffer_bytes() const { return comm_buffer_need(spec_, *shards_, grid_.shape(), run_); }

GptMemory Gpt::memory_need(const GptConfig& config, const parallel::GridShape& shape,
                           const parallel::GridCoords& coords, int B_local, int T, kernels::Backend backend,
                           const GptRunOptions& run, bool kv_cache) {
  const ModelSpec spec = model_spec(config);
  const ShardMap shards(spec, shape, coords);
  const Device device = kernels::backend_device(backend);
  Arena params("parameters", device), grads("gradients", device), params_bf16("parameters (bf16 copies)", device);
  Arena acts("activations", device), scratch("backward scratch", device);
  Arena block_acts("block activations", device), block_scratch("block scratch", device), rope("RoPE", device),
      cache("KV cache", device);
  const int64_t N = static_cast<int64_t>(B_local) * T;
  reserve_model(spec, shards, shape, N, run, device != Device::kCpu, params, grads, params_bf16, acts, scratch);
  const detail::BlockShape block{&spec, shape.gy, B_local, T, config.channels / shape.gx, N, run.recompute,
                                 run.precision == DType::kBF16};
  const bool llama = config.family == Family::kLlama;
  if (llama)
    detail::LlamaBlock::reserve(block, block_acts, block_scratch, rope);
  else
    detail::Gpt2Block::reserve(block, block_acts, block_scratch);
  if (kv_cache)
    detail::KvCache::reserve(cache, config.num_layers, B_local, T,
                             llama ? detail::LlamaBlock::kv_width(block) : detail::Gpt2Block::kv_width(block),
                             run.precision);
  GptMemory m;
  m.params = (fp32_weights_kept(run) ? params.bytes() : 0) + params_bf16.bytes();
  m.grads = grads.bytes();
  m.activations = acts.bytes() + scratch.bytes() + block_acts.bytes() + block_scratch.bytes() + rope.bytes() +
                  cache.bytes();
  m.comm_buffers = comm_buffer_need(spec, shards, shape, run);
  return m;
}

int64_t Gpt::full_layer_numel(int t) const { return shards_->full_layer_numel(t); }

int64_t Gpt::global_index(int t, int64_t j) const { return shards_->global_index(t, j); }

bool Gpt::keeps_fp32_weights() const { return fp32_weights_kept(run_); }

void Gpt::store_shard(int t, int64_t at, const float* values, int64_t n) {
  if (keeps_fp32_weights()) {
    float* dst = param(t).f32() + at;
    if (on_device())
      mem_->upload(dst, values, sizeof(float) * static_cast<size_t>(n));
    else
      std::memcpy(dst, values, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  kernels::bf16* dst = params_bf16_.tensor(static_cast<size_t>(t)).bf16() + at;
  std::vector<kernels::bf16> staged(on_device() ? static_cast<size_t>(n) : 0);
  kernels::bf16* out = on_device() ? staged.data() : dst;
  for (int64_t i = 0; i < n; i++) out[i] = f32_to_bf16(values[i]);
  if (on_device()) mem_->upload(dst, staged.data(), sizeof(kernels::bf16) * static_cast<size_t>(n));
}

void Gpt::load_full_layer(int t, int layer, const float* full) {
  weights_updated();
  const bool per_layer = spec_.params[static_cast<size_t>(t)].per_layer;
  const int64_t n = shards_->shard_layer_numel(t), at = per_layer ? layer * n : 0;
  // the shard is runs of consecutive elements of the full tensor (rows, or a block row's columns), picked
  // out on the host, then stored
  std::vector<float> shard(static_cast<size_t>(n));
  for (int64_t j = 0, len = 0; j < n; j += len) {
    len = shards_->run_length(t, j);
    std::memcpy(shard.data() + j, full + global_index(t, j), sizeof(float) * static_cast<size_t>(len));
  }
  store_shard(t, at, shard.data(), n);
}

void Gpt::load_full_range(int t, int layer, int64_t first, int64_t count, const float* values) {
  AXONN_CHECK(!on_device(), "load_full_range() fills host memory; a device model loads whole layers (load_full_layer)");
  weights_updated();
  const bool per_layer = spec_.params[static_cast<size_t>(t)].per_layer;
  const int64_t n = shards_->shard_layer_numel(t), at = per_layer ? layer * n : 0, last = first + count;
  // the runs of the shard (consecutive elements of the full tensor) that meet [first, last)
  for (int64_t j = 0, len = 0; j < n; j += len) {
    len = shards_->run_length(t, j);
    const int64_t g = global_index(t, j), lo = std::max(g, first), hi = std::min(g + len, last);
    if (lo < hi) store_shard(t, at + j + (lo - g), values + (lo - first), hi - lo);
  }
}

void Gpt::load_params(const Arena& host) {
  AXONN_CHECK(host.device() == Device::kCpu && host.size() == params_.size(), "load_params() takes a host arena "
              "of the parameters' layout");
  weights_updated();
  if (keeps_fp32_weights()) {
    params_.copy_from(host);
    return;
  }
  for (int t = 0; t < static_cast<int>(host.size()); t++) {
    const Tensor h = host.tensor(static_cast<size_t>(t));
    store_shard(t, 0, h.f32(), h.numel());
  }
}

void Gpt::init_random(uint64_t seed) {
  weights_updated();
  for (int i = 0; i < static_cast<int>(spec_.params.size()); i++) {
    const int layers = spec_.params[static_cast<size_t>(i)].per_layer ? spec_.config.num_layers : 1;
    const int64_t per_layer = shards_->shard_layer_numel(i), full = full_layer_numel(i);
    // computed on the host, then stored
    std::vector<float> w(static_cast<size_t>(per_layer * layers));
#pragma omp parallel for collapse(2) schedule(static)
    for (int l = 0; l < layers; l++)
      for (int64_t j = 0; j < per_layer; j++)
        w[static_cast<size_t>(l * per_layer + j)] = init_value(spec_, i, l * full + global_index(i, j), seed);
    store_shard(i, 0, w.data(), static_cast<int64_t>(w.size()));
  }
}

// The rows of x_slice [N, C/Gx] with all C channels, gathered over X into `full` ([N, C]);
// `scratch` ([N, C]) receives the all-gather's rank-major blocks. With Gx = 1, x_slice itself.
template <class E>
const E* Gpt::full_channels(const E* x_slice, E* full, E* scratch) {
  return full_channels<E>(x_slice, full, scratch, static_cast<int64_t>(B_) * T_);
}

template <class E>
const E* Gpt::full_channels(const E* x_slice, E* full, E* scratch, int64_t N) {
  comm::Communicator& xg = grid_.x();
  if (xg.size() == 1) return x_slice;
  const int C = spec_.config.channels;
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
  const int K = static_cast<int>(spec_.linears.size());
  std::vector<parallel::WeightGather::Use> u;
  for (int l = 0; l < spec_.config.num_layers; l++)
    for (int k = 0; k < K; k++) u.push_back({k, l});
  return u;
}

std::vector<parallel::WeightGather::Use> Gpt::backward_uses() const {
  // Blocks in reverse; a recomputed block takes its weights in forward order first. The last block
  // is not recomputed: the forward has just left its activations in the one slot.
  const int K = static_cast<int>(spec_.linears.size()), L = spec_.config.num_layers;
  std::vector<parallel::WeightGather::Use> u;
  for (int l = L - 1; l >= 0; l--) {
    if (run_.recompute && l != L - 1)
      for (int k = 0; k < K; k++) u.push_back({k, l});
    for (int k = K - 1; k >= 0; k--) u.push_back({k, l});
  }
  return u;
}

template <class E>
void Gpt::block_forward(int l, const detail::CachedChunk* chunk) {
  const E* in = l == 0 ? ptr<E>(acts_.tensor(kEncoded)) : ptr<E>(acts_.tensor(kStream)[l - 1]);
  E* out = ptr<E>(acts_.tensor(kStream)[l]);
  if (gpt2_)
    gpt2_->forward<E>(l, in, out, chunk);
  else
    llama_->forward<E>(l, in, out, chunk);
}

template <class E>
void Gpt::embed(const int* in, int B, int T, int pos) {
  auto& tl = tl_;
  const auto& k = ctx_->kernels<E>();
  constexpr DType dt = kernels::Precision<E>::kDType;
  const int C = spec_.config.channels, Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * T;
  auto P = [&](int t) { return ctx_->weight<E>(t); };
  // token embedding, vocabulary-parallel: each rank of X*Y looks up the tokens among its rows
  // (zeros for the others); the all-reduce completes every row; this rank keeps its X channels
  const E* wte = ptr<E>(P(spec_.token_embedding));
  E* encoded = ptr<E>(acts_.tensor(kEncoded));
  if (grid_.xy().size() == 1) {
    AXONN_OP(embedding_forward, encoded, in, wte, vocab_begin_, Vr, N, C);
  } else {
    E* emb = ptr<E>(scratch_.tensor(kFullA));
    AXONN_OP(embedding_forward, emb, in, wte, vocab_begin_, Vr, N, C);
    tl.all_reduce(grid_.xy(), emb, static_cast<size_t>(N) * C, dt);  // over X*Y (one non-zero term: exact)
    auto copy = tl.compute("copy_columns");
    copy_columns(*mem_, encoded, emb, N, C, grid_.coords().x * Cx_, Cx_);
  }
  if (spec_.position_embedding >= 0)
    AXONN_OP(position_forward, encoded, ptr<E>(P(spec_.position_embedding)) + static_cast<int64_t>(pos) * Cx_, B, T,
             Cx_);
}

template <class E>
void Gpt::block_backward(int l, bool last) {
  const E* in = l == 0 ? ptr<E>(acts_.tensor(kEncoded)) : ptr<E>(acts_.tensor(kStream)[l - 1]);
  E* dresidual = ptr<E>(scratch_.tensor(kDResidual));
  if (gpt2_)
    gpt2_->backward<E>(l, in, dresidual, last);
  else
    llama_->backward<E>(l, in, dresidual, last);
}

float Gpt::forward(const int* inputs, const int* targets) { return forward(inputs, targets, nullptr); }

float Gpt::forward(const int* inputs, const int* targets, const uint8_t* keep) {
  return forward(inputs, targets, keep, ForwardOptions{});
}

float Gpt::forward(const int* inputs, const int* targets, const uint8_t* keep, const ForwardOptions& options) {
  AXONN_CHECK_ARG(keep == nullptr || targets != nullptr, "a loss mask needs the targets");
  AXONN_CHECK_ARG(!options.loss_scale || targets != nullptr, "a training forward (ForwardOptions::loss_scale) "
                  "needs the targets");
  if (options.loss_scale) require_gradients("a training forward (ForwardOptions::loss_scale)");
  AXONN_CHECK(!head_gradient_scale_, "forward() after a training forward whose backward() has not run: "
              "the LM head's gradient of that forward would be left without the rest of its backward");
  return run_.precision == DType::kBF16 ? forward_pass<kernels::bf16>(inputs, targets, keep, options)
                                        : forward_pass<float>(inputs, targets, keep, options);
}

double Gpt::sum_over_batch(double local) const {
  float value = static_cast<float>(local);
  all_reduce_scalars(grid_.z(), &value, 1);     // over Z
  all_reduce_scalars(grid_.data(), &value, 1);  // over data
  return value;
}

int* Gpt::begin_forward(const int* tokens, int64_t n, const char* what) {
  const int V = spec_.config.vocab_size;
  int* in = static_cast<int*>(acts_.tensor(kInputs).data());
  for (int64_t i = 0; i < n; i++)
    AXONN_CHECK_ARG(tokens[i] >= 0 && tokens[i] < V, what, " id ", tokens[i], " at position ", i,
                    " is outside the vocabulary [0, ", V, ")");
  mem_->upload(in, tokens, sizeof(int) * static_cast<size_t>(n));
  // A new step (the optimizer, or a load, may have changed the weights since the last backward of the
  // last one): no gathered weight block of before may be reused.
  if (!step_open_) {
    gather_->invalidate();
    if (!bf16_copies_current_) refresh_bf16_copies();  // unless the optimizer wrote them in its pass
    step_open_ = true;
  }
  gather_->begin(forward_uses());
  return in;
}

template <class E>
void Gpt::final_norm(E* lnf, const E* last, int64_t rows) {
  auto A = [&](Act a) { return acts_.tensor(a); };
  const E* weight = ptr<E>(ctx_->weight<E>(spec_.final_norm));
  if (spec_.norm == Norm::kLayerNorm)
    detail::layernorm_forward<E>(*ctx_, lnf, A(kLnfMean).f32(), A(kLnfRstd).f32(), last, weight,
                                 ptr<E>(ctx_->weight<E>(spec_.final_norm_bias)), rows);
  else
    detail::rmsnorm_forward<E>(*ctx_, lnf, A(kLnfRstd).f32(), last, weight, spec_.config.norm_eps, rows);
}

template <class E>
float Gpt::forward_pass(const int* inputs, const int* targets, const uint8_t* keep, const ForwardOptions& options) {
  auto& tl = tl_;
  auto scope = tl.group("forward");
  const auto& k = ctx_->kernels<E>();
  const GptConfig& c = spec_.config;
  const int B = B_, T = T_, C = c.channels, L = c.num_layers, V = c.vocab_size;
  const int Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * T;
  auto P = [&](int t) { return ctx_->weight<E>(t); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return ptr<E>(scratch_.tensor(s)); };

  int* in = begin_forward(inputs, N, "token");
  have_targets_ = targets != nullptr;
  if (have_targets_) {
    int* tg = static_cast<int*>(A(kTargets).data());
    for (int64_t i = 0; i < N; i++)
      AXONN_CHECK_ARG(targets[i] >= 0 && targets[i] < V, "target id ", targets[i], " at position ", i,
                      " is outside the vocabulary [0, ", V, ")");
    mem_->upload(tg, targets, sizeof(int) * static_cast<size_t>(N));
  }
  masked_ = keep != nullptr;
  if (masked_) {
    host_weights_.resize(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; i++) host_weights_[static_cast<size_t>(i)] = keep[i] ? 1.0f : 0.0f;
    mem_->upload(A(kLossWeights).f32(), host_weights_.data(), sizeof(float) * static_cast<size_t>(N));
  }

  embed<E>(in, B, T, 0);
  for (int l = 0; l < L; l++) block_forward<E>(l);

  E* lnf = ptr<E>(A(kLnf));
  final_norm<E>(lnf, ptr<E>(A(kStream)[L - 1]), N);
  // LM head (GPT-2: the token embedding): all channels of lnf (gathered over X) against this rank's
  // vocabulary rows
  const E* lnf_full = full_channels<E>(lnf, ptr<E>(A(kLnfFull)), S(kFullB));
  E* logits = ptr<E>(A(kLogits));
  const E* head = ptr<E>(P(spec_.lm_head));
  if (!have_targets_) {
    AXONN_CHECK_ARG(head_rows_ == N, "the logits of a forward without targets need the whole LM head at once; "
                    "build the model with lm_head_chunk 0 (it is ", run_.lm_head_chunk, ")");
    AXONN_OP(matmul_forward, logits, lnf_full, head, nullptr, N, C, Vr);
    return std::numeric_limits<float>::quiet_NaN();
  }
  // A training forward takes the head's gradient here: the loss is loss_scale * the mean over the global
  // batch's counted targets, so each counted target's d loss is loss_scale / their count (masked: the
  // kept targets, counted over Z and data before the head).
  const double global_tokens = static_cast<double>(N) * grid_.shape().gz * grid_.shape().gdata;
  const bool take_gradient = options.loss_scale.has_value();
  float dloss = 0.0f;
  E* dlnf_full = ptr<E>(A(kDLnfFull));  // d lnf over all channels, partial over X*Y
  if (take_gradient) {
    double counted = global_tokens;
    if (masked_ && options.kept_targets) {
      counted = *options.kept_targets;  // counted by the caller
    } else if (masked_) {
      double local_kept = 0.0;
      for (int64_t i = 0; i < N; i++) local_kept += keep[i] ? 1.0 : 0.0;
      counted = sum_over_batch(local_kept);  // over Z and data
    }
    dloss = loss_gradient_per_target(*options.loss_scale, counted);
    mem_->zero(dlnf_full, sizeof(E) * static_cast<size_t>(N) * C);
  }
  // by chunks of rows: the chunk's logits, then its vocabulary-parallel softmax + cross-entropy over X*Y.
  // Training: the losses and d logits in one pass over the logits, then d lnf and the head's weight gradient
  // from the chunk; else the probabilities overwrite the logits and the last chunk's are kept for the backward.
  float* losses = A(kLosses).f32();
  for (int64_t r = 0; r < N; r += head_rows_) {
    const int64_t n = std::min(head_rows_, N - r);
    if (take_gradient)
      head_chunk_backward<E>(r, n, dloss, lnf_full, dlnf_full, /*probs_kept=*/false);
    else
      head_chunk_forward<E>(r, n, lnf_full);
  }
  if (take_gradient) head_gradient_scale_ = options.loss_scale;
  // the mean over the global batch: this rank's tokens are summed (on the host, in order: the same
  // sum on every backend), then over Z and data
  const float* host_losses = losses;
  if (on_device()) {
    mem_->download(host_losses_.data(), losses, sizeof(float) * static_cast<size_t>(N));
    host_losses = host_losses_.data();
  }
  double local = 0.0;
  for (int64_t i = 0; i < N; i++) local += host_losses[i];
  if (!masked_) {
    float sum = static_cast<float>(local);
    all_reduce_scalars(grid_.z(), &sum, 1);     // over Z
    all_reduce_scalars(grid_.data(), &sum, 1);  // over data
    last_loss_ = {sum, global_tokens, sum, global_tokens};
    return static_cast<float>(sum / global_tokens);
  }
  // masked: every target's sum, the kept targets' sum and their count, over Z and data
  double kept_sum = 0.0, kept = 0.0;
  for (int64_t i = 0; i < N; i++)
    if (keep[i]) {
      kept_sum += host_losses[i];
      kept += 1.0;
    }
  AXONN_CHECK_ARG(global_tokens < 16777216.0, "a masked loss counts its targets in fp32: the global batch's ",
                  global_tokens, " tokens must stay below 2^24; use micro-batches");
  float sums[3] = {static_cast<float>(local), static_cast<float>(kept_sum), static_cast<float>(kept)};
  all_reduce_scalars(grid_.z(), sums, 3);     // over Z
  all_reduce_scalars(grid_.data(), sums, 3);  // over data
  last_loss_ = {sums[1], sums[2], sums[0], global_tokens};
  return sums[2] > 0 ? static_cast<float>(sums[1] / sums[2]) : 0.0f;
}

void Gpt::require_gradients(const char* call) const {
  AXONN_CHECK_ARG(!run_.inference, call, " needs gradients, and this model was built for inference without them "
                  "(GptRunOptions::inference)");
}

void Gpt::backward(const BackwardOptions& options) {
  require_gradients("backward()");
  AXONN_CHECK(have_targets_, "backward() needs a forward() with targets");
  AXONN_CHECK(!sync_->pending() && !sync_->armed(),
              "backward() after the step's last backward: call sync_gradients() (and the optimizer) first");
  if (head_gradient_scale_) {
    const double taken = *head_gradient_scale_;
    AXONN_CHECK_ARG(taken == options.loss_scale || (std::isnan(taken) && std::isnan(options.loss_scale)),
                    "backward() with loss_scale ", options.loss_scale, " after a forward that took the LM head's "
                    "gradient with loss_scale ", taken, ": pass the same scale to both");
  }
  if (run_.precision == DType::kBF16)
    backward_pass<kernels::bf16>(options);
  else
    backward_pass<float>(options);
}

template <class E>
void Gpt::backward_pass(const BackwardOptions& options) {
  auto& tl = tl_;
  auto scope = tl.group("backward");
  const auto& k = ctx_->kernels<E>();
  constexpr DType dt = kernels::Precision<E>::kDType;
  const GptConfig& c = spec_.config;
  const int B = B_, T = T_, C = c.channels, L = c.num_layers, Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * T;
  const bool last = options.last_micro_batch;
  auto P = [&](int t) { return ctx_->weight<E>(t); };
  auto G = [&](int t) { return grad(t); };
  auto A = [&](Act a) { return acts_.tensor(a); };
  auto S = [&](Scratch s) { return ptr<E>(scratch_.tensor(s)); };
  const int* in = static_cast<const int*>(A(kInputs).data());
  {
    auto zero = tl.compute("zero_scratch");
    scratch_.zero();
    if (gpt2_)
      gpt2_->zero_scratch();
    else
      llama_->zero_scratch();
  }
  // DP overlap: the gradient sums over data and Z·data are issued in this backward as each tensor's
  // gradient becomes final, which is only in the step's last micro-batch.
  sync_->arm(run_.overlap.dp && last);
  gather_->begin(backward_uses());

  // The residual stream's gradient is accumulated in one buffer (dresidual): a residual add
  // passes its output gradient unchanged to both inputs, so the branch reads dresidual as its
  // output gradient and the norm at the branch's start adds its input gradient back into it.
  E* dresidual = S(kDResidual);
  E* dln = S(kDLn);

  // LM head: d lnf over all channels is partial over X*Y (each rank has its vocabulary rows):
  // all-reduced over X*Y, then this rank keeps its X channels. A training forward took it already
  // (kDLnfFull), with the head's weight gradient.
  E* dlnf_full = ptr<E>(A(kDLnfFull));
  if (head_gradient_scale_)
    head_gradient_scale_.reset();
  else
    backward_head<E>(dlnf_full, options.loss_scale);
  if (grid_.xy().size() > 1) {
    tl.all_reduce(grid_.xy(), dlnf_full, static_cast<size_t>(N) * C, dt);  // over X*Y
    auto copy = tl.compute("copy_columns");
    copy_columns(*mem_, dln, dlnf_full, N, C, grid_.coords().x * Cx_, Cx_);
  } else {
    dln = dlnf_full;  // all channels are this rank's
  }
  const E* last_out = ptr<E>(A(kStream)[L - 1]);
  if (spec_.norm == Norm::kLayerNorm)
    detail::layernorm_backward<E>(*ctx_, dresidual, G(spec_.final_norm).f32(), G(spec_.final_norm_bias).f32(),
                                  scratch_.tensor(kNormSums).f32(), dln, last_out, ptr<E>(P(spec_.final_norm)),
                                  A(kLnfMean).f32(), A(kLnfRstd).f32());
  else
    detail::rmsnorm_backward<E>(*ctx_, dresidual, G(spec_.final_norm).f32(), scratch_.tensor(kNormSums).f32(), dln,
                                last_out, ptr<E>(P(spec_.final_norm)), A(kLnfRstd).f32());
  sync_->issue_stage(Stage::kHead);  // over Z·data: the final norm's (and an untied head's) gradient is complete

  for (int l = L - 1; l >= 0; l--) {
    // recompute: the block's activations again, from its kept input (the last block's are still there)
    if (run_.recompute && l != L - 1) block_forward<E>(l);
    block_backward<E>(l, last);
  }
  if (spec_.position_embedding >= 0)
    AXONN_OP(position_backward, G(spec_.position_embedding).f32(), dresidual, B, T, Cx_);
  // token embedding: the rows' gradient over all channels (gathered over X; the same on every Y
  // rank), scattered into this rank's vocabulary rows
  const E* demb = full_channels<E>(dresidual, S(kFullA), S(kFullB));
  AXONN_OP(embedding_backward, G(spec_.token_embedding).f32(), demb, in, vocab_begin_, Vr, N, C);
  sync_->issue_stage(Stage::kEmbedding);  // over Z·data
  // the probabilities were overwritten by their gradient: another backward needs another forward
  have_targets_ = false;
  // the step's weights may change now: the next forward gathers them afresh (and rounds the bf16 copies,
  // unless the optimizer writes them: update())
  if (last) {
    step_open_ = false;
    bf16_copies_current_ = false;
  }
}

// The LM head's gradient after a forward that did not take it: d lnf over all channels into dlnf_full
// (partial over X*Y) and the head's weight gradient. By chunks of rows, the last first: its
// probabilities are still there; each earlier chunk's are recomputed (logits, softmax over X*Y).
template <class E>
void Gpt::backward_head(E* dlnf_full, double loss_scale) {
  const int C = spec_.config.channels;
  const int64_t N = static_cast<int64_t>(B_) * T_;
  auto A = [&](Act a) { return acts_.tensor(a); };
  // the loss is loss_scale * the mean over the global batch's counted targets (micro-batches: the mean over
  // the whole step); the forward counted them (every target without a mask)
  const float dloss = loss_gradient_per_target(loss_scale, last_loss_.kept);
  const E* lnf_full = grid_.x().size() == 1 ? ptr<E>(A(kLnf)) : ptr<E>(A(kLnfFull));
  mem_->zero(dlnf_full, sizeof(E) * static_cast<size_t>(N) * C);
  const int64_t last_chunk = (N - 1) / head_rows_ * head_rows_;
  for (int64_t r = last_chunk; r >= 0; r -= head_rows_) {
    const int64_t n = std::min(head_rows_, N - r);
    head_chunk_backward<E>(r, n, dloss, lnf_full, dlnf_full, /*probs_kept=*/r == last_chunk);
  }
}

// The head's rows [r, r + n): their logits (kLogits) against this rank's vocabulary rows, then the
// vocabulary-parallel cross-entropy's row values (kHeadRowValues: max, sum of exp, target logit), each completed
// over X*Y between the kernels' steps.
template <class E>
void Gpt::head_chunk_row_values(int64_t r, int64_t n, const E* lnf_full) {
  auto& tl = tl_;
  const auto& k = ctx_->kernels<E>();
  const int C = spec_.config.channels, Vr = vocab_rows_;
  E* logits = ptr<E>(acts_.tensor(kLogits));
  const E* head = ptr<E>(ctx_->weight<E>(spec_.lm_head));
  const int* targets_dev = static_cast<const int*>(acts_.tensor(kTargets).data()) + r;
  float* maxv = acts_.tensor(kHeadRowValues).f32();  // [n] row max
  float* sums = maxv + head_rows_;                   // [n] sum of exp | [n] target logit
  const auto rows = static_cast<size_t>(n);
  AXONN_OP(matmul_forward, logits, lnf_full + r * C, head, nullptr, n, C, Vr);
  AXONN_OP(crossentropy_max, maxv, logits, n, vocab_valid_, Vr);
  tl.all_reduce(grid_.xy(), maxv, rows, comm::ReduceOp::kMax);  // over X*Y
  AXONN_OP(crossentropy_sums, sums, maxv, logits, targets_dev, n, vocab_valid_, Vr, vocab_begin_);
  tl.all_reduce(grid_.xy(), sums, 2 * rows);  // over X*Y
}

// A forward that does not take the gradient: the chunk's row values, then its softmax (the probabilities
// overwrite the logits) and its losses (kLosses[r, r + n)).
template <class E>
void Gpt::head_chunk_forward(int64_t r, int64_t n, const E* lnf_full) {
  auto& tl = tl_;
  const auto& k = ctx_->kernels<E>();
  E* logits = ptr<E>(acts_.tensor(kLogits));
  const float* maxv = acts_.tensor(kHeadRowValues).f32();
  head_chunk_row_values<E>(r, n, lnf_full);
  AXONN_OP(softmax_crossentropy_forward, acts_.tensor(kLosses).f32() + r, logits, logits, maxv, maxv + head_rows_, n,
           vocab_valid_, vocab_rows_);
}

// The gradient of the head's rows [r, r + n): d logits in place in kLogits (masked: the kernels apply the
// per-token weights, 0 for a dropped target), then d lnf of those rows over all channels (into dlnf_full) and
// the head's weight gradient. From the probabilities a forward kept there (probs_kept), or else from the logits:
// the row values, then the losses (kLosses[r, r + n); a backward that recomputes a chunk writes the same bits
// again) and d logits in one pass that never stores the probabilities.
template <class E>
void Gpt::head_chunk_backward(int64_t r, int64_t n, float dloss, const E* lnf_full, E* dlnf_full, bool probs_kept) {
  auto& tl = tl_;
  const auto& k = ctx_->kernels<E>();
  const int C = spec_.config.channels, Vr = vocab_rows_;
  E* dlogits = ptr<E>(acts_.tensor(kLogits));
  const E* head = ptr<E>(ctx_->weight<E>(spec_.lm_head));
  const int* targets_dev = static_cast<const int*>(acts_.tensor(kTargets).data()) + r;
  const float* weights = masked_ ? acts_.tensor(kLossWeights).f32() + r : nullptr;
  if (probs_kept) {
    AXONN_OP(softmax_crossentropy_backward, dlogits, dlogits, targets_dev, weights, dloss, n, vocab_valid_, Vr,
             vocab_begin_);
  } else {
    const float* maxv = acts_.tensor(kHeadRowValues).f32();
    head_chunk_row_values<E>(r, n, lnf_full);
    AXONN_OP(softmax_crossentropy_forward_backward, acts_.tensor(kLosses).f32() + r, dlogits, dlogits, maxv,
             maxv + head_rows_, targets_dev, weights, dloss, n, vocab_valid_, Vr, vocab_begin_);
  }
  AXONN_OP(matmul_backward, dlnf_full + r * C, grad(spec_.lm_head).f32(), nullptr, dlogits, lnf_full + r * C, head, n,
           C, Vr);
}

void Gpt::sync_gradients() {
  require_gradients("sync_gradients()");
  auto scope = tl_.group("sync_gradients");
  sync_->sync(spec_.config.num_layers);
}

void Gpt::zero_grad() {
  require_gradients("zero_grad()");
  AXONN_CHECK(!head_gradient_scale_, "zero_grad() between a training forward and its backward() would drop the LM "
              "head's gradient that the forward took: zero the gradients before the forward");
  sync_->reset();
  grads_.zero();
}

void Gpt::weights_updated() {
  gather_->invalidate();
  step_open_ = false;
  bf16_copies_current_ = false;
}

void Gpt::update(const UpdatePass& pass) {
  require_gradients("update()");
  AXONN_CHECK(!step_open_, "update() during a step: the optimizer runs after the last backward");
  pass(params_, grads_, bf16_copies(), ops_bf16_);
  if (ops_bf16_) bf16_copies_current_ = true;  // rounded in the pass
  mem_->synchronize();
}

double Gpt::grad_norm() const {
  require_gradients("grad_norm()");
  AXONN_CHECK(rs_.empty() && !sync_->pending(), "grad_norm() before sync_gradients(): gradients are incomplete");
  auto scope = tl_.group("grad_norm");
  const parallel::GridShape& g = grid_.shape();
  const int count = static_cast<int>(spec_.params.size());
  std::vector<double> sums;
  {
    auto scope_sums = tl_.compute("sum_squares");
    sums = kernels::sums_of_squares(*ops_, grads_);  // one wait for a GPU
  }
  AXONN_CHECK(static_cast<int>(sums.size()) == count, "the gradients' arena has ", sums.size(),
              " tensors, the model ", count);
  double local = 0.0;
  for (int i = 0; i < count; i++) {
    // how many ranks of one model replica (X*Y*Z) hold the same elements of tensor i
    const unsigned axes = spec_.replica_axes(i);
    double replicas = 1;
    if (axes & kReplicatedOverX) replicas *= g.gx;
    if (axes & kReplicatedOverY) replicas *= g.gy;
    if (axes & kReplicatedOverZ) replicas *= g.gz;
    local += sums[i] / replicas;
  }
  // fp32 all-reduce of a double: split into a high and a low part to keep the precision
  float parts[2] = {static_cast<float>(local), static_cast<float>(local - static_cast<float>(local))};
  all_reduce_scalars(grid_.xyz(), parts, 2);  // over X*Y*Z
  return std::sqrt(static_cast<double>(parts[0]) + parts[1]);
}

Tensor Gpt::output() const { return acts_.tensor(kLogits); }

void Gpt::refresh_bf16_copies() {
  if (run_.precision != DType::kBF16) return;
  if (!keeps_fp32_weights()) {  // the bf16 weights are the model's own: nothing to round
    bf16_copies_current_ = true;
    return;
  }
  auto scope = tl_.compute("cast_to_bf16");
  for (size_t i = 0; i < params_.size(); i++) {
    Tensor master = params_.tensor(i);
    ops_bf16_->cast_from_f32(params_bf16_.tensor(i).bf16(), master.f32(), master.numel());
  }
  bf16_copies_current_ = true;
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
  const GptConfig& c = spec_.config;
  const double C = c.channels, L = c.num_layers, Vp = c.padded_vocab_size, T = T_, A = c.attention_width();
  const double tokens = static_cast<double>(B_) * T_ * grid_.shape().gz * grid_.shape().gdata;
  // forward per token: 2 FLOPs per weight of the matmuls (the block's linears, C Vp for the head)
  // plus attention's two T x T products (q k^T and att v), counted in full as is customary
  double linear_weights = 0;
  for (const LinearSpec& l : spec_.linears) linear_weights += static_cast<double>(l.in) * l.out;
  double fwd_per_token = 2.0 * (linear_weights * L + C * Vp) + 2.0 * 2.0 * T * A * L;
  return 3.0 * fwd_per_token * tokens;
}

// --- inference with a KV cache --------------------------------------------------------------------

void Gpt::forward_cached(const int* tokens, int pos, int n, float* logits, bool all_positions) {
  if (run_.precision == DType::kBF16)
    forward_cached_pass<kernels::bf16>(tokens, pos, n, logits, all_positions);
  else
    forward_cached_pass<float>(tokens, pos, n, logits, all_positions);
}

template <class E>
void Gpt::forward_cached_pass(const int* tokens, int pos, int n, float* logits, bool all_positions) {
  const auto& k = ctx_->kernels<E>();
  AXONN_CHECK_ARG(k.attention_cached_forward != nullptr,
                  "these kernels have no KV cache (generation): use --kernels cpu or cuda");
  AXONN_CHECK_ARG(n > 0 && pos >= 0 && pos + n <= T_, "a chunk of ", n, " tokens at position ", pos,
                  " does not fit the context of ", T_, " positions");
  AXONN_CHECK(!head_gradient_scale_, "forward_cached() after a training forward whose backward() has not run");
  auto& tl = tl_;
  auto scope = tl.group("forward_cached");
  const GptConfig& c = spec_.config;
  const int B = B_, C = c.channels, L = c.num_layers, V = c.vocab_size, Vp = c.padded_vocab_size, Vr = vocab_rows_;
  const int64_t N = static_cast<int64_t>(B) * n;
  auto P = [&](int t) { return ctx_->weight<E>(t); };
  auto A = [&](Act a) { return acts_.tensor(a); };

  int* in = begin_forward(tokens, N, "token");
  have_targets_ = false;  // the activations are this chunk's now: no backward until a forward

  embed<E>(in, B, n, pos);
  const detail::CachedChunk chunk{pos, n};
  for (int l = 0; l < L; l++) block_forward<E>(l, &chunk);

  // the rows whose logits are wanted: every position, or each sequence's last (picked out)
  const E* last = ptr<E>(A(kStream)[L - 1]);
  const int64_t rows = all_positions ? N : B;
  if (!all_positions && n > 1) {
    auto pick = tl.compute("pick_last_positions");
    E* picked = ptr<E>(scratch_.tensor(kDResidual));
    const size_t w = sizeof(E) * static_cast<size_t>(Cx_);
    mem_->copy_2d(picked, w, last + static_cast<int64_t>(n - 1) * Cx_, w * static_cast<size_t>(n), w,
                  static_cast<size_t>(B));
    last = picked;
  }
  // the final norm (statistics over X), and the LM head: all channels against this rank's vocabulary rows
  E* lnf = ptr<E>(A(kLnf));
  final_norm<E>(lnf, last, rows);
  const E* lnf_full = full_channels<E>(lnf, ptr<E>(A(kLnfFull)), ptr<E>(scratch_.tensor(kFullB)), rows);
  // by chunks of the head's rows (GptRunOptions::lm_head_chunk): each chunk's logits against this rank's
  // vocabulary rows, placed (widened to fp32) in a [n, Vp] block that is zero elsewhere, summed over X*Y
  // (one non-zero term per element: exact); the first V columns are the logits
  E* local = ptr<E>(A(kLogits));
  for (int64_t r0 = 0; r0 < rows; r0 += head_rows_) {
    const int64_t n_rows = std::min(head_rows_, rows - r0);
    AXONN_OP(matmul_forward, local, lnf_full + r0 * C, ptr<E>(P(spec_.lm_head)), nullptr, n_rows, C, Vr);
    vocab_rows_full_.assign(static_cast<size_t>(n_rows) * Vp, 0.0f);
    if constexpr (std::is_same_v<E, float>) {
      mem_->copy_2d(vocab_rows_full_.data() + vocab_begin_, sizeof(float) * static_cast<size_t>(Vp), local,
                    sizeof(float) * static_cast<size_t>(Vr), sizeof(float) * static_cast<size_t>(Vr),
                    static_cast<size_t>(n_rows));
    } else {  // host memory (the KV cache ops are the CPU's)
      for (int64_t r = 0; r < n_rows; r++)
        ops_bf16_->cast_to_f32(vocab_rows_full_.data() + r * Vp + vocab_begin_, local + r * Vr, Vr);
    }
    tl.all_reduce(grid_.xy(), vocab_rows_full_.data(), vocab_rows_full_.size());  // over X*Y
    for (int64_t r = 0; r < n_rows; r++)
      std::memcpy(logits + (r0 + r) * V, vocab_rows_full_.data() + r * Vp, sizeof(float) * static_cast<size_t>(V));
  }
}

}  // namespace axonn::model
