// planner/workload.hpp — what is being trained: the model (GPT-2 or Llama, model/gpt_config.hpp),
// sequence length, batch, and FLOP counts.
//
// The model's tensors and its block's tensor-parallel linear layers come from model/spec.hpp (GPT-2:
// QKV h -> 3h normal, out-proj h -> h transposed, FC1 h -> 4h normal, FC2 4h -> h transposed, spec
// §3.4; Llama: q|k|v, o_proj, gate|up, down). A normal layer splits its input features over X and
// output features over Y; a transposed one swaps X and Y.
//
//   auto w = axonn::planner::Workload{*axonn::planner::find_model("80B"), /*seq_len=*/2048,
//                                     /*batch_size=*/1024};
//   double f = axonn::planner::gpt_hardware_flops(w);   // 96·B·S·L·H²·(1 + S/6H + V/16LH) for GPT-2
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/model/gpt_config.hpp"
#include "axonn/model/spec.hpp"

namespace axonn::planner {

struct ModelShape {
  std::string name;         // empty for a custom shape
  model::GptConfig config;  // the shape (its padded vocabulary is what the model computes with)
  long min_tp = 1;          // minimum Gx·Gy·Gz AxoNN's launcher used for this model (spec §3.6), 1 if none

  long layers() const { return config.num_layers; }
  long hidden() const { return config.channels; }
  long heads() const { return config.num_heads; }
  long vocab() const { return config.padded_vocab_size; }  // V (padded, e.g. 50304 for GPT-2's 50257)
};

// The SC24 Perlmutter models (spec §7.2: 5B … 175B, GPT-2-shaped with vocab 50304), the GPT-2 family
// (gpt2, gpt2-medium, gpt2-large, gpt2-xl) and the Llama family of model::gpt_preset (tinyllama-1.1b,
// llama-3.2-1b, llama-2-7b, llama-3.1-8b, llama-3.1-70b, llama-3.1-405b).
const std::vector<ModelShape>& known_models();
// Case-insensitive lookup in known_models(); "80b" and "80B" both work, and the GPT-2 family also
// answers to `axonn train`'s names (gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m).
std::optional<ModelShape> find_model(std::string_view name);
// A GPT-2-shaped model of the given size (the vocabulary padded, as the SC24 models').
ModelShape gpt_shape(std::string name, long layers, long hidden, long heads, long vocab, long min_tp = 1);

// The sequence length a plan assumes unless given (axonn plan --seq-len, the library, the examples): the SC24
// runs' 2048.
inline constexpr long kDefaultSeqLen = 2048;

struct Workload {
  ModelShape model;
  long seq_len = kDefaultSeqLen;  // S
  long batch_size = 0;         // B, global, in sequences per optimizer step
  long grad_accumulation = 1;  // micro-batches per step (weights re-gathered per micro-batch)
  long positions = 0;          // rows of the position embedding (max sequence length); 0 = seq_len

  long position_rows() const { return positions > 0 ? positions : seq_len; }

  // Throws axonn::InvalidArgument naming the bad value and what to change.
  void validate() const;
  double tokens() const { return static_cast<double>(batch_size) * static_cast<double>(seq_len); }
  // The model's tensors (GPT-2's position embedding with position_rows() rows).
  model::ModelSpec spec() const;
  // Trainable parameters (GPT-2: 12·H² + 13·H per block, V·H (tied) + position_rows()·H embeddings,
  // final norm 2·H).
  double parameters() const;
};

// One tensor-parallel linear layer of the block.
struct LinearLayer {
  std::string name;
  long in_features = 0;
  long out_features = 0;
  bool transposed = false;  // in-features over Y, out-features over X (AxoNN's transpose=True)
};
// The block's linear layers (model/spec.hpp's LinearSpec), in forward order.
std::vector<LinearLayer> block_linear_layers(const model::ModelSpec& spec);

// FLOPs per optimizer step as Megatron-AxoNN counts them (spec §7.3): hardware FLOPs with full
// activation recomputation, 8 per linear weight and token (forward twice, backward twice), the
// attention scores 16·S·A per layer and token (A = heads·head size), the LM head 6·V·H; for GPT-2
// that is 96·B·S·L·H²·(1 + S/(6H) + V/(16·L·H)).
double gpt_hardware_flops(const Workload& w);
// Model FLOPs (no recomputation): 6 per linear weight and token, 12·S·A per layer and token, 6·V·H;
// GPT-2's 72·B·S·L·H²·(1 + S/(6H) + V/(12·L·H)). The numerator of MFU.
double gpt_model_flops(const Workload& w);

}  // namespace axonn::planner
