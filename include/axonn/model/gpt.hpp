// model/gpt.hpp — GPT-2 with an explicit forward and backward, on AxoNN's 4D grid.
//
// Every rank of a Grid (Gx x Gy x Gz x Gdata; one rank is the 1x1x1x1 grid) holds its shards of
// llm.c's 16 parameter tensors, in llm.c's order, stacked over layers, and runs the model on its
// B_local sequences (the global batch split over Z and data). Layouts (docs/parallelism.md):
//   residual stream, LayerNorms:  [tokens, C/Gx], replicated over Y; statistics all-reduced over X
//   QKV, FC (normal linear):      C/Gx -> (3C|4C)/Gy; heads split over Y
//   attention projection, FC2:    transposed linear, (C|4C)/Gy -> C/Gx
//   token embedding = LM head:    vocabulary rows split over X*Y (full C); vocabulary-parallel
//                                 cross-entropy over X*Y
//   position embedding:           [maxT, C/Gx]
// The forward and backward are straight-line code over the layers (src/model/gpt.cpp), every
// collective visible where it runs; the backward runs in exact reverse order.
//
//   model::Gpt gpt(cfg, grid, B_local, T, kernels::Backend::kCpu);
//   gpt.init_random(seed);                      // or load_llmc(...) through load_full_layer
//   float loss = gpt.forward(inputs, targets);  // this rank's B_local*T tokens; returns the global mean
//   gpt.zero_grad();
//   gpt.backward();
//   gpt.sync_gradients();                       // once per optimizer step
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "axonn/core/profiler.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/parallel/linear.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::model {

// llm.c's parameter tensors, in checkpoint order.
enum class Param : int {
  kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb,
  kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb,
};
constexpr int kNumParamTensors = 16;
const char* param_name(Param p);
// Shape of one full parameter tensor (stacked over layers where per-layer).
Shape param_shape(const GptConfig& c, Param p);
// True for the tensors stacked over layers ([L, ...]).
bool param_is_per_layer(Param p);
// True for the matrices (embeddings and linear weights), the tensors that take weight decay.
bool param_is_matrix(Param p);

// Reserves the 16 full parameter tensors in an arena, in llm.c's order (slot i is Param(i)).
void reserve_gpt_params(Arena& arena, const GptConfig& c);

// GPT-2's initialisation of element `index` of the full tensor p: normal(0, 0.02) for embeddings
// and linear weights, 0.02/sqrt(2L) for the residual projections, LayerNorm weights 1, biases 0,
// padded vocabulary rows 0. A counter-based generator: the value depends only on (seed, p, index),
// so every shard of every grid initialises to the same model.
float gpt2_init_value(const GptConfig& c, Param p, int64_t index, uint64_t seed);
// Fills an arena of full tensors (reserve_gpt_params) with gpt2_init_value.
void init_gpt_params(Arena& params, const GptConfig& c, uint64_t seed);

class Gpt {
 public:
  // B_local sequences of T tokens per forward on this rank; T <= max_seq_len. Every rank of the
  // grid constructs the model (collective-free; throws InvalidArgument if the grid does not divide
  // the model).
  Gpt(GptConfig config, const parallel::Grid& grid, int B_local, int T, kernels::Backend backend);
  ~Gpt();

  const GptConfig& config() const { return config_; }
  const parallel::Grid& grid() const { return grid_; }
  int batch_size() const { return B_; }
  int seq_len() const { return T_; }
  Arena& params() { return params_; }
  const Arena& params() const { return params_; }
  Arena& grads() { return grads_; }
  const Arena& grads() const { return grads_; }
  Tensor param(Param p) const { return params_.tensor(static_cast<size_t>(p)); }
  Tensor grad(Param p) const { return grads_.tensor(static_cast<size_t>(p)); }

  // Index in the full tensor p (within one layer's slice for per-layer tensors) of element j of
  // this rank's shard of one layer.
  int64_t global_index(Param p, int64_t j) const;
  // Elements of one layer's slice of the full tensor p (the whole tensor if not per-layer).
  int64_t full_layer_numel(Param p) const;
  // Copies this rank's shard out of one layer of the full tensor p (full: full_layer_numel floats).
  void load_full_layer(Param p, int layer, const float* full);

  void init_random(uint64_t seed);

  // Runs the model on this rank's inputs [B_local*T] and returns the mean cross-entropy over the
  // global batch (all ranks' tokens), the same value on every rank. targets may be null: then only
  // the logits are computed and NaN is returned.
  float forward(const int* inputs, const int* targets);
  void zero_grad() { grads_.zero(); }
  // Accumulates the gradient of the last forward's global mean loss: weight shards are complete
  // over Z; everything else holds this rank's tokens' contribution until sync_gradients().
  void backward();
  // Sums the gradients over the ranks that saw other tokens (spec §3.5): weight shards over data,
  // replicated tensors (biases, norms, embeddings) over Z and data. Once per optimizer step.
  void sync_gradients();
  // L2 norm of the whole model's gradient, each element counted once however many ranks hold it.
  // Collective over X*Y*Z.
  double grad_norm() const;

  // This rank's softmax probabilities [B_local, T, its vocabulary rows] after a forward with
  // targets, logits without; vocab_begin() is the id of the first column.
  const float* output() const;
  int vocab_begin() const { return vocab_begin_; }
  int vocab_rows() const { return vocab_rows_; }

  // Bytes held by this rank: parameters, gradients, activations (incl. the backward's scratch and
  // the gathered-weight workspaces).
  size_t param_bytes() const { return params_.bytes(); }
  size_t grad_bytes() const { return grads_.bytes(); }
  size_t activation_bytes() const { return acts_.bytes() + scratch_.bytes(); }

  // Model FLOPs of one forward+backward over the global batch (matmuls and attention, 3x the
  // forward), the numerator of MFU.
  double flops_per_step() const;

  // Time every kernel call and layer into `profiler` (null: off).
  void set_profiler(Profiler* profiler) { profiler_ = profiler; }

 private:
  const float* full_channels(const float* x_slice, float* full, float* scratch) const;

  GptConfig config_;
  const parallel::Grid& grid_;
  int B_, T_;
  const kernels::Ops* ops_;
  // this rank's share of the dimensions
  int Cx_, Cy_, NHy_, vocab_begin_, vocab_rows_, vocab_valid_;
  parallel::TpLinear qkv_, attproj_, fc_, fcproj_;
  Arena params_, grads_, acts_, scratch_;
  kernels::RowReducer x_reducer_{}, xy_reducer_{};
  bool have_targets_ = false;
  Profiler* profiler_ = nullptr;
};

}  // namespace axonn::model
