// model/gpt.hpp — a GPT-style model (GPT-2 or Llama, GptConfig::family) with an explicit forward and
// backward, on AxoNN's 4D grid.
//
// Every rank of a Grid (Gx x Gy x Gz x Gdata; one rank is the 1x1x1x1 grid) holds its shards of the
// model's parameter tensors (model/spec.hpp: GPT-2's are llm.c's 16, in llm.c's order), stacked over
// layers, and runs the model on its B_local sequences (the global batch split over Z and data).
// Layouts (docs/parallelism.md):
//   residual stream, norms:       [tokens, C/Gx], replicated over Y; statistics all-reduced over X
//   QKV, FC / gate|up (normal):   C/Gx -> out/Gy; heads (and their KV heads) split over Y
//   attention projection, FC2 / down: transposed linear, in/Gy -> C/Gx
//   token embedding, LM head:     vocabulary rows split over X*Y (full C); vocabulary-parallel
//                                 cross-entropy over X*Y (GPT-2: the head is the embedding)
//   position embedding (GPT-2):   [maxT, C/Gx]
// The forward and backward are straight-line code over the layers (src/model/gpt.cpp), one forward
// and one backward per block kind (src/model/gpt2_block.cpp, llama_block.cpp), every collective visible
// where it runs; the backward runs in exact reverse order. GptRunOptions chooses which collectives
// overlap with computation (docs/overlap.md), activation recompute and the caching of gathered
// weights; none of them changes the results.
//
//   model::Gpt gpt(cfg, grid, B_local, T, kernels::Backend::kCpu);
//   gpt.init_random(seed);                      // or load_full_layer from a checkpoint
//   gpt.zero_grad();
//   float loss = gpt.forward(inputs, targets);  // this rank's B_local*T tokens; returns the global mean
//   gpt.backward();
//   gpt.sync_gradients();                       // once per optimizer step
//   double norm = gpt.grad_norm();
//   gpt.update([&](Arena& p, Arena& g, Arena* copies, const kernels::OpsBf16* ops) {  // the step's one exit
//     opt.step(p, g, lr, optim::clip_scale(norm, clip), {copies, ops});
//   });
// Gradient accumulation over M micro-batches (B_local = the micro-batch):
//   gpt.zero_grad();
//   for (k = 0; k < M; k++) { gpt.forward(in_k, tg_k); gpt.backward({1.0 / M, k == M - 1}); }
//   gpt.sync_gradients();
// A training forward that knows its backward's scale takes the LM head's gradient itself (no logits are
// computed again under lm_head_chunk; train::train_step does this):
//   gpt.zero_grad();
//   for (k = 0; k < M; k++) { gpt.forward(in_k, tg_k, nullptr, {1.0 / M}); gpt.backward({1.0 / M, k == M - 1}); }
//   gpt.sync_gradients();
// A loss over some targets only (the Goldfish loss, model/goldfish.hpp): forward(in, tg, keep) returns
// the mean over the kept targets of the global batch and backward() the gradient of loss_scale * it;
// last_loss() has its parts (train/step.cpp weighs the micro-batches by their kept counts).
// bf16 mixed precision (docs/precision.md): GptRunOptions run; run.precision = DType::kBF16; and the same
// calls; params(), grads() and the optimizer stay fp32.
// Gathered weights (and the cache, --cache-gathered-weights) are reused only within one step: the
// first forward after a last micro-batch's backward gathers afresh. After writing params() outside
// of update() (loading, a step without backward), call weights_updated().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "axonn/core/profiler.hpp"
#include "axonn/core/trace.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/kernels/ops_bf16.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/model/spec.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/linear.hpp"
#include "axonn/parallel/overlap.hpp"
#include "axonn/parallel/timeline.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::model {

class ShardMap;  // model/shard_map.hpp: which elements of the full tensors this rank holds
namespace detail {
struct PassContext;
struct CachedChunk;
class GradientSync;
class Gpt2Block;
class LlamaBlock;
}  // namespace detail

// GPT-2's tensors, llm.c's 16 in checkpoint order: their indices in model_spec's list for the gpt2
// family (and in llm.c files).
enum Param : int {
  kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb,
  kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb,
};
constexpr int kGpt2Tensors = 16;

// The initialisation of element `index` of the full tensor t (model/spec.hpp's InitSpec): GPT-2's
// normal(0, 0.02), 0.02/sqrt(2L) for the residual projections; Llama's normal(0, 0.02); norm weights
// 1, biases 0, padded vocabulary rows 0. A counter-based generator: the value depends only on (seed,
// t, index), so every shard of every grid initialises to the same model.
float init_value(const ModelSpec& spec, int t, int64_t index, uint64_t seed);
// Fills an arena of full tensors (reserve_params) with init_value.
void init_params(Arena& params, const ModelSpec& spec, uint64_t seed);

// How the model runs. The precision chooses the numerics (docs/precision.md). The rest (docs/overlap.md)
// never changes the results: losses, gradients and updated weights are bit-identical for every
// combination, in either precision.
struct GptRunOptions {
  // kF32: everything fp32. kBF16: mixed precision (kernels/ops_bf16.hpp): the kernels read bf16 copies of
  // the fp32 parameters (refreshed at the start of each step), activations, their gradients and the
  // activation collectives are bf16; parameters(), gradients, the optimizer and checkpoints stay fp32.
  DType precision = DType::kF32;
  parallel::Overlap overlap;            // which collectives overlap with computation (default: none)
  bool recompute = false;               // keep only the blocks' inputs; re-run each block's forward
                                        // (with its collectives) in the backward
  bool cache_gathered_weights = false;  // keep every weight block gathered over Z for the whole step
                                        // (all micro-batches), instead of two buffers
  int reduce_scatter_slots = 4;         // ORS: dW blocks in flight at once (a transformer block's four)
  // The LM head, softmax and cross-entropy by chunks of this many rows (tokens) of the local batch (0:
  // all rows at once): only [chunk, V/(X·Y)] logits are ever held instead of [B·T, V/(X·Y)]. A training
  // forward (ForwardOptions::loss_scale) takes each chunk's loss and its gradient while the chunk's
  // probabilities are at hand, then drops them: every head GEMM runs once. A forward without it takes
  // the losses only, and the backward recomputes each chunk's logits and softmax (one more head GEMM per
  // chunk but the last) to take their gradient. Unlike the settings above it changes the bits: the
  // head's weight gradient is summed chunk by chunk (equal to rounding). A forward without targets
  // (output(): the logits) needs 0.
  int lm_head_chunk = 0;
  // A model for inference only (infer::Generator): no gradient arena is allocated (grads() is empty), and
  // what needs gradients (a training forward, backward(), zero_grad(), sync_gradients(), grad_norm(),
  // update()) is refused with InvalidArgument. forward() for the loss and forward_cached() run as ever.
  // With precision kBF16 an inference model keeps its weights in bf16 only (no fp32 masters: nothing
  // updates them): every load rounds into them, and params() is reserved but never allocated.
  bool inference = false;
};

// What one rank's Gpt allocates, in bytes: the parts that param_bytes(), grad_bytes(), activation_bytes() and
// comm_buffer_bytes() report once it is built.
struct GptMemory {
  size_t params = 0, grads = 0, activations = 0, comm_buffers = 0;
};

// The last forward's loss over the global batch (every rank's tokens; the same on every rank).
struct LossParts {
  double kept_sum = 0.0;  // the sum of the counted targets' losses (every target's without a mask)
  double kept = 0.0;      // the counted targets
  double all_sum = 0.0;   // the sum of every target's loss
  double all = 0.0;       // every target
};

struct ForwardOptions {
  // A training forward: the loss_scale of the backward() that follows (BackwardOptions::loss_scale).
  // Given, the forward also takes the LM head's share of the gradient, chunk by chunk while each
  // chunk's probabilities are at hand (d logits, the head's weight gradient, d of the final norm's
  // output); that backward() then starts below the head, and needs the same loss_scale. zero_grad() may
  // not come between the two (it would drop the head's gradient). Unset (evaluation, or a caller that
  // decides the scale later): no gradient here, and backward() takes the head's.
  std::optional<double> loss_scale;
  // A masked training forward: this micro-batch's kept targets over the global batch (Z and data), when
  // the caller has counted them already (train::train_step does, for the step's normaliser); unset, the
  // forward counts them (one more sum over Z and data).
  std::optional<double> kept_targets;
};

struct BackwardOptions {
  double loss_scale = 1.0;        // the gradient is of loss_scale * the forward's mean loss (1/M for M micro-batches)
  bool last_micro_batch = true;   // the step's last backward: DP overlap issues the gradient sums in it
};

class Gpt {
 public:
  // B_local sequences of T tokens per forward on this rank; T <= max_seq_len. Every rank of the
  // grid constructs the model (collective-free; throws InvalidArgument if the grid does not divide
  // the model). Backend::kCuda puts every arena (parameters, gradients, activations, scratch) and
  // communication buffer in device memory (after kernels::cuda_setup()); the grid's communicators
  // must then take device buffers (NCCL or MPI-staged). Inputs, targets and the returned loss stay
  // on the host; params()/grads()/output() are device memory (Arena::copy_from to read them).
  Gpt(GptConfig config, const parallel::Grid& grid, int B_local, int T, kernels::Backend backend,
      const GptRunOptions& run = {});
  ~Gpt();
  const GptRunOptions& run_options() const { return run_; }
  // The bytes that Gpt(config, a grid of `shape`, B_local, T, backend, run) allocates on the rank at `coords`,
  // from the reservations the constructor makes, without allocating or communicating: a memory check
  // before the model is built. kv_cache: with the KV cache that forward_cached() adds.
  static GptMemory memory_need(const GptConfig& config, const parallel::GridShape& shape,
                               const parallel::GridCoords& coords, int B_local, int T, kernels::Backend backend,
                               const GptRunOptions& run = {}, bool kv_cache = false);

  const GptConfig& config() const { return spec_.config; }
  // The model's tensors (slot t of params() and grads() is spec().params[t]).
  const ModelSpec& spec() const { return spec_; }
  const parallel::Grid& grid() const { return grid_; }
  int batch_size() const { return B_; }
  int seq_len() const { return T_; }
  // The fp32 weights (unallocated in a bf16 inference model: keeps_fp32_weights()).
  Arena& params() { return params_; }
  const Arena& params() const { return params_; }
  bool keeps_fp32_weights() const;
  // Every weight of this rank from `host`, a host arena of params()'s layout (fp32): copied, or rounded
  // into the bf16 weights of a model that keeps no fp32 ones. Then weights_updated().
  void load_params(const Arena& host);
  Arena& grads() { return grads_; }
  const Arena& grads() const { return grads_; }
  Tensor param(int t) const { return params_.tensor(static_cast<size_t>(t)); }
  Tensor grad(int t) const { return grads_.tensor(static_cast<size_t>(t)); }
  // Which slots take AdamW weight decay (the spec's matrices; every one with decay_all).
  std::vector<bool> decay_mask(bool decay_all = false) const;

  // Index in the full tensor t (within one layer's slice for per-layer tensors) of element j of
  // this rank's shard of one layer (the grid's ShardMap, model/shard_map.hpp).
  int64_t global_index(int t, int64_t j) const;
  const ShardMap& shard_map() const { return *shards_; }
  // Elements of one layer's slice of the full tensor t (the whole tensor if not per-layer).
  int64_t full_layer_numel(int t) const;
  // Copies this rank's shard out of one layer of the full tensor t (full: full_layer_numel floats).
  void load_full_layer(int t, int layer, const float* full);
  // The same for the elements [first, first + count) of one layer of the full tensor t only (values: those
  // count floats): this rank's shard is filled piece by piece (checkpoint::HfCheckpoint::load_ranges), with
  // no copy of a whole layer. Host models (Backend::kCpu) only.
  void load_full_range(int t, int layer, int64_t first, int64_t count, const float* values);

  void init_random(uint64_t seed);

  // Runs the model on this rank's inputs [B_local*T] and returns the mean cross-entropy over the
  // global batch (all ranks' tokens), the same value on every rank. targets may be null: then only
  // the logits are computed and NaN is returned.
  float forward(const int* inputs, const int* targets);
  // The same with a mask over the targets: keep[B_local*T] (host memory), 1 where the target counts in
  // the loss and 0 where it is dropped. Every target's loss is still computed (last_loss().all_sum);
  // returns the mean over the kept targets of the global batch (0 when none is kept), the loss whose
  // gradient the next backward() takes. keep == null: forward(inputs, targets).
  float forward(const int* inputs, const int* targets, const uint8_t* keep);
  // The same, as a training forward with options.loss_scale (ForwardOptions): train::train_step's call.
  float forward(const int* inputs, const int* targets, const uint8_t* keep, const ForwardOptions& options);
  // The last forward's sums and counts (after a forward with targets).
  const LossParts& last_loss() const { return last_loss_; }
  // Sums a value of this rank's tokens (host memory; e.g. a count) over the ranks that hold the global
  // batch's other tokens (Z, then data). Collective over Z and data; exact for integers below 2^24.
  double sum_over_batch(double local) const;
  // Zeroes the gradients (after completing any weight-gradient reduce-scatter still in flight, whose
  // late accumulation would otherwise land in the new step's gradients).
  void zero_grad();
  // Accumulates the gradient of loss_scale * the last forward's global mean loss. Weight shards are
  // summed over Z (at once, or by sync_gradients() under ORS); everything holds this rank's tokens'
  // contribution until sync_gradients().
  void backward(const BackwardOptions& options = {});
  // Completes the weight-gradient reduce-scatters and sums the gradients over the ranks that saw
  // other tokens (spec §3.5): weight shards over data, replicated tensors (biases, norms,
  // embeddings) over Z·data; under DP overlap most sums were issued during the last backward and
  // are only waited here. Once per optimizer step, before grad_norm() and the optimizer.
  void sync_gradients();
  // L2 norm of the whole model's gradient, each element counted once however many ranks hold it.
  // Collective over X*Y*Z. After sync_gradients().
  double grad_norm() const;
  // The parameters were changed other than by the optimizer after a last backward: forget the
  // gathered weight blocks (and, in mixed precision, round the bf16 copies again at the next forward).
  void weights_updated();
  // The optimizer's pass, the step's one exit (after sync_gradients()): pass(params, grads, bf16_copies,
  // bf16_ops) updates the fp32 masters from the gradients and, in mixed precision, rounds the bf16 copies
  // the kernels read in the same pass (both null in fp32): optim::AdamW::step with optim::WeightCopies,
  // as train::train_step. The next forward then does not round the copies again, and the device's queued
  // work is done when update() returns (the update belongs to the step's time).
  using UpdatePass = std::function<void(Arena& params, Arena& grads, Arena* bf16_copies,
                                        const kernels::OpsBf16* bf16_ops)>;
  void update(const UpdatePass& pass);
  // Mixed precision: the bf16 copies of the weights that the kernels read (null in fp32).
  Arena* bf16_copies() { return ops_bf16_ ? &params_bf16_ : nullptr; }

  // Inference with a KV cache (docs/generate.md; fp32 or bf16 on the CPU kernels: InvalidArgument on CUDA).
  // bf16: the weights, activations and KV cache are bf16, every sum fp32; the logits are the bf16 LM
  // head's outputs, widened.
  // tokens [B_local, n] (host memory) are the tokens at positions [pos, pos + n) of this rank's B_local
  // sequences, pos + n <= T; positions [0, pos) were run by the calls before (pos = 0 starts new
  // sequences). Every block runs on the B_local*n rows, appending their keys and values (this rank's
  // KV heads) to its cache and attending over positions [0, pos + n) of it. Writes to `logits` (host
  // memory) the logits of all V tokens (gathered over X*Y: the same on every rank of the group), of
  // each sequence's last position [B_local, V], or with all_positions of every position
  // [B_local, n, V]. Collective over X*Y*Z; the weights are gathered over Z as in forward() (once per
  // generation with cache_gathered_weights). No gradients: backward() needs a forward().
  void forward_cached(const int* tokens, int pos, int n, float* logits, bool all_positions = false);

  // This rank's softmax probabilities [B_local, T, its vocabulary rows] after a forward with
  // targets, logits without; vocab_begin() is the id of the first column. In the model's memory
  // (device memory with Backend::kCuda), of the model's precision (fp32 or bf16).
  Tensor output() const;
  int vocab_begin() const { return vocab_begin_; }
  int vocab_rows() const { return vocab_rows_; }

  // Bytes held by this rank: parameters, gradients, activations (incl. the backward's scratch), and
  // the communication buffers (gathered weight blocks, the reduce-scatter pool, at their largest).
  // the weights this rank allocated: the fp32 ones (unless a bf16 inference model's) and the bf16 copies
  size_t param_bytes() const { return (keeps_fp32_weights() ? params_.bytes() : 0) + params_bf16_.bytes(); }
  size_t grad_bytes() const { return grads_.bytes(); }
  size_t activation_bytes() const;
  size_t comm_buffer_bytes() const;
  // Where the arenas live: Device::kCuda with Backend::kCuda.
  Device device() const { return mem_->device; }
  const MemoryOps& memory() const { return *mem_; }
  // The element type of activations and of the weights the kernels read (run options' precision).
  DType precision() const { return run_.precision; }

  // Model FLOPs of one forward+backward over the global batch (matmuls and attention, 3x the
  // forward), the numerator of MFU.
  double flops_per_step() const;

  // Time every kernel call and layer into `profiler` (null: off).
  void set_profiler(Profiler* profiler) { tl_.set_profiler(profiler); }
  // Record kernels, layers and collectives into `trace` while it records (null: off).
  void set_trace(Trace* trace) { tl_.set_trace(trace); }

 private:
  // The passes, written once for both precisions: E = float (fp32) or kernels::bf16 (mixed precision).
  template <class E>
  float forward_pass(const int* inputs, const int* targets, const uint8_t* keep, const ForwardOptions& options);
  template <class E>
  void backward_pass(const BackwardOptions& options);
  template <class E>
  void backward_head(E* dlnf_full, double loss_scale);
  template <class E>
  void head_chunk_row_values(int64_t r, int64_t n, const E* lnf_full);
  template <class E>
  void head_chunk_forward(int64_t r, int64_t n, const E* lnf_full);
  template <class E>
  void head_chunk_backward(int64_t r, int64_t n, float dloss, const E* lnf_full, E* dlnf_full, bool probs_kept);
  // One block of the model's kind, forward (from `in` to `out`) and backward.
  // The token embedding (GPT-2: + the position embedding of positions [pos, pos + T)) of in [B, T].
  template <class E>
  void embed(const int* in, int B, int T, int pos);
  template <class E>
  void block_forward(int l, const detail::CachedChunk* chunk = nullptr);
  template <class E>
  void block_backward(int l, bool last);
  template <class E>
  const E* full_channels(const E* x_slice, E* full, E* scratch);
  template <class E>
  const E* full_channels(const E* x_slice, E* full, E* scratch, int64_t rows);
  // bf16: rounds the fp32 parameters into their bf16 copies (at the start of a step).
  void refresh_bf16_copies();
  template <class E>
  void forward_cached_pass(const int* tokens, int pos, int n, float* logits, bool all_positions);
  // n fp32 values into this rank's shard of tensor t from element `at` of its slot (all layers): the fp32
  // weights, or the bf16 ones of a model that keeps no fp32 weights (rounded).
  void store_shard(int t, int64_t at, const float* values, int64_t n);
  // The start of every forward (forward() and forward_cached()): the n tokens (host memory) checked
  // against the vocabulary and copied into slot `slot` of the model's memory (uploaded on the GPU); then,
  // on the first forward since the weights changed, no gathered weight block of before is reused and the
  // bf16 copies are rounded unless the optimizer wrote them; and the pass's weight gathers begin.
  int* begin_forward(const int* tokens, int64_t n, const char* what);
  // The final norm (LayerNorm or RMSNorm, statistics over X) of `rows` rows of the last block's output.
  template <class E>
  void final_norm(E* lnf, const E* last, int64_t rows);
  // Weight uses of one forward / backward pass, in order (WeightGather's schedule).
  std::vector<parallel::WeightGather::Use> forward_uses() const;
  std::vector<parallel::WeightGather::Use> backward_uses() const;
  bool on_device() const { return mem_->device != Device::kCpu; }
  // Sums values[n] (host memory, n <= 4) over group, through a device word on the GPU.
  void all_reduce_scalars(comm::Communicator& group, float* values, int64_t n) const;

  ModelSpec spec_;
  const parallel::Grid& grid_;
  int B_, T_;
  const kernels::Ops* ops_;           // fp32 kernels: always (gradients are fp32 in both precisions)
  const kernels::OpsBf16* ops_bf16_;  // bf16 kernels: mixed precision only, else null
  const MemoryOps* mem_;  // the memory of the kernels: host, or device for Backend::kCuda
  GptRunOptions run_;
  // which elements of the full tensors this rank holds (the layouts of docs/parallelism.md)
  std::unique_ptr<ShardMap> shards_;
  // this rank's share of the dimensions
  int Cx_, vocab_begin_, vocab_rows_, vocab_valid_;
  void require_gradients(const char* call) const;  // InvalidArgument under GptRunOptions::inference
  int64_t head_rows_ = 0;  // rows of the LM head at a time (GptRunOptions::lm_head_chunk; all: B·T)
  Arena params_, grads_, acts_, scratch_;
  Arena params_bf16_;  // mixed precision: the bf16 copies of params_ that the kernels read (else empty)
  mutable parallel::Timeline tl_;  // kernels and collectives, timed and traced
  parallel::ReduceScatterQueue rs_;
  std::unique_ptr<detail::GradientSync> sync_;
  std::unique_ptr<parallel::WeightGather> gather_;
  parallel::LinearRun linear_run_;
  std::unique_ptr<detail::PassContext> ctx_;
  std::unique_ptr<detail::Gpt2Block> gpt2_;    // the blocks: GPT-2's
  std::unique_ptr<detail::LlamaBlock> llama_;  // or Llama's
  bool have_targets_ = false;
  bool masked_ = false;   // the last forward's loss counts only the kept targets (kLossWeights)
  // the loss_scale with which the last forward took the head's gradient (kDLnfFull holds d lnf); unset:
  // the backward takes it
  std::optional<double> head_gradient_scale_;
  LossParts last_loss_;
  std::vector<float> host_weights_;  // the mask as the backward's per-token weights, before the upload
  bool step_open_ = false;  // gathered weights may be reused (a step is under way)
  bool bf16_copies_current_ = false;  // params_bf16_ = round(params_) (mixed precision)
  std::vector<float> host_losses_;  // on the GPU: the per-token losses, downloaded to be summed
  std::vector<float> vocab_rows_full_;  // forward_cached: logits rows of the padded vocabulary, summed over X*Y
};

}  // namespace axonn::model
