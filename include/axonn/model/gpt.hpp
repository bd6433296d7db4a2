// model/gpt.hpp — GPT-2 with an explicit forward and backward (llm.c's structure).
//
// Parameters, gradients, activations and backward scratch each live in one Arena. The parameter
// tensors are llm.c's 16, in its order, stacked over layers ([L, ...]), so a checkpoint is read
// tensor by tensor into them. The forward and backward are straight-line code over the layers
// (src/model/gpt.cpp); the backward runs in exact reverse order.
//
//   model::Gpt gpt(cfg, B, T, kernels::Backend::kCpu);
//   gpt.init_random(seed);                      // or checkpoint::load_llmc(path, gpt.params())
//   float loss = gpt.forward(inputs, targets);  // inputs, targets: [B*T] token ids
//   gpt.zero_grad();
//   gpt.backward();                             // gradients in gpt.grads()
#pragma once

#include <array>
#include <cstdint>

#include "axonn/core/profiler.hpp"
#include "axonn/kernels/ops.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::model {

// llm.c's parameter tensors, in checkpoint order.
enum class Param : int {
  kWte, kWpe, kLn1w, kLn1b, kQkvw, kQkvb, kAttprojw, kAttprojb,
  kLn2w, kLn2b, kFcw, kFcb, kFcprojw, kFcprojb, kLnfw, kLnfb,
};
constexpr int kNumParamTensors = 16;
const char* param_name(Param p);
// Shape of one parameter tensor (stacked over layers where per-layer).
Shape param_shape(const GptConfig& c, Param p);
// True for the matrices (embeddings and linear weights), the tensors that take weight decay.
bool param_is_matrix(Param p);

// Reserves the 16 parameter tensors in an arena, in llm.c's order (slot i is Param(i)).
void reserve_gpt_params(Arena& arena, const GptConfig& c);

// Fills an arena laid out by reserve_gpt_params with GPT-2's initialisation: normal(0, 0.02) for
// embeddings and linear weights, 0.02/sqrt(2L) for the residual projections (attproj, fcproj),
// LayerNorm weights 1, biases 0; padded vocabulary rows 0. The value of every element depends only
// on (seed, tensor, element index) — a counter-based generator — so any shard of any tensor can be
// initialised alone and agrees with the full one.
void init_gpt_params(Arena& params, const GptConfig& c, uint64_t seed);

class Gpt {
 public:
  // B sequences of T tokens per forward; T <= max_seq_len.
  Gpt(GptConfig config, int B, int T, kernels::Backend backend);

  const GptConfig& config() const { return config_; }
  int batch_size() const { return B_; }
  int seq_len() const { return T_; }
  Arena& params() { return params_; }
  const Arena& params() const { return params_; }
  Arena& grads() { return grads_; }
  const Arena& grads() const { return grads_; }
  Tensor param(Param p) const { return params_.tensor(static_cast<size_t>(p)); }
  Tensor grad(Param p) const { return grads_.tensor(static_cast<size_t>(p)); }

  void init_random(uint64_t seed) { init_gpt_params(params_, config_, seed); }

  // Runs the model on inputs [B*T] and returns the mean cross-entropy against targets [B*T]
  // (targets may be null: then only the logits are computed and NaN is returned).
  float forward(const int* inputs, const int* targets);
  void zero_grad() { grads_.zero(); }
  // Accumulates the gradient of the mean loss of the last forward into grads(). Needs targets.
  void backward();

  // Softmax probabilities [B,T,Vp] after a forward with targets, logits without.
  const float* output() const;

  // Bytes held: parameters, gradients, activations (incl. the backward's scratch).
  size_t param_bytes() const { return params_.bytes(); }
  size_t grad_bytes() const { return grads_.bytes(); }
  size_t activation_bytes() const { return acts_.bytes() + scratch_.bytes(); }

  // Model FLOPs of one forward+backward over B*T tokens (matmuls and attention, 3x the forward),
  // the numerator of MFU.
  double flops_per_step() const;

  // Time every kernel call into `profiler` (null: off).
  void set_profiler(Profiler* profiler) { profiler_ = profiler; }

 private:
  GptConfig config_;
  int B_, T_;
  const kernels::Ops* ops_;
  Arena params_, grads_, acts_, scratch_;
  bool have_targets_ = false;
  Profiler* profiler_ = nullptr;
};

}  // namespace axonn::model
