// model/spec.hpp — a model described once: the list of its parameter tensors.
//
// model_spec(config) lists every parameter tensor of a GPT-2 or Llama model (GptConfig::family) with
// its full shape, its name in our checkpoints and in Hugging Face's files, its parallel role, whether
// it takes weight decay, and how it is initialised. Everything else that depends on the tensors is
// derived from this list, never written again:
//   - the shards a rank of a 4D grid holds (model/shard_map.hpp) and the model's arenas (model/gpt.hpp);
//   - which gradients are summed over which group, in which bucket, and how many ranks of a model
//     replica hold each element (the gradient norm's replica counts) (src/model/grad_sync.cpp);
//   - the checkpoints' tensor names (checkpoint/sharded.hpp) and the HF layout (checkpoint/hf.hpp);
//   - the planner's collectives per layer (planner/step_collectives.hpp), checked against a traced step.
//
// The roles (docs/parallelism.md has the layouts):
//   kLinearWeight  a tensor-parallel linear's weight W [out, in] (LinearSpec): the (out/G_out x in/G_in)
//                  block of this rank, flat, cut into Gz pieces (ZeRO-3); no replica in X*Y*Z
//   kLinearBias    its bias: the output block; replicated over the input group and Z
//   kVocab         the token embedding or an untied LM head [Vp, C]: vocabulary rows over X*Y, all C
//                  channels; replicated over Z
//   kPosition      GPT-2's position embedding [maxT, C]: the X slice of the channels; replicated over Y, Z
//   kNormWeight, kNormBias   a LayerNorm's or RMSNorm's weight and bias [C]: the X slice (the residual
//                  stream's channels); replicated over Y and Z
//
// This header and model/gpt_config.hpp form the library axonn_model_spec, which needs no MPI, so that
// the planner (core only otherwise) derives its collectives from the same list.
//
//   model::ModelSpec spec = model::model_spec(model::gpt_preset("llama-tiny"));
//   for (const model::ParamSpec& p : spec.params) std::printf("%s %s\n", p.name.c_str(), p.shape.str().c_str());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/model/gpt_config.hpp"
#include "axonn/tensor/arena.hpp"
#include "axonn/tensor/shape.hpp"

namespace axonn::model {

enum class Role { kLinearWeight, kLinearBias, kVocab, kPosition, kNormWeight, kNormBias };

// The grid axes (bit mask) over which ranks hold identical shards of a tensor, besides data, over
// which every tensor is replicated.
enum ReplicaAxis : unsigned { kReplicatedOverX = 1u, kReplicatedOverY = 2u, kReplicatedOverZ = 4u };

// Where in the backward a tensor's gradient becomes complete on this rank: after its block's
// backward, after the LM head's and the final norm's, or at the very end (the token embedding, which
// a tied LM head also uses, and the position embedding). Its sum over the ranks that saw other
// tokens is issued there (under DP overlap).
enum class Stage { kBlock, kHead, kEmbedding };

enum class Norm { kLayerNorm, kRmsNorm };

// How a tensor's elements start: normal(0, std) (counter-based, model/gpt.hpp init_value), or a constant.
struct InitSpec {
  enum Kind { kNormal, kOnes, kZeros } kind = kZeros;
  float std = 0.0f;
};

// A block's tensor-parallel linear layer y = x W^T + b (parallel/layout.hpp): normal (in over X, out
// over Y) or transposed (in over Y, out over X); several stacked output matrices (parts), each split
// over the output group alone.
struct LinearSpec {
  std::string name;         // "qkv", "attproj", "fc", "fcproj"; "qkv", "o_proj", "gate_up", "down"
  int in = 0, out = 0;
  std::vector<int> parts;   // rows of each stacked output matrix (sum: out)
  bool transposed = false;
  int weight = -1;          // its weight's index in ModelSpec::params
  int bias = -1;            // its bias's index, or -1
};

struct ParamSpec {
  std::string name;         // our name: the arena slot and the checkpoints' tensor "params.<name>"
  Shape shape;              // the full tensor, [L, ...] when per-layer (stacked over the layers)
  bool per_layer = false;
  Role role = Role::kNormWeight;
  Stage stage = Stage::kBlock;
  int linear = -1;          // kLinearWeight, kLinearBias: its LinearSpec
  bool decay = false;       // AdamW weight decay: the matrices (embeddings and linear weights)
  InitSpec init;
  // Hugging Face's tensor names ("{i}" is the layer): one, or one per output part of a linear when HF
  // keeps the parts apart (Llama's q_proj, k_proj, v_proj; gate_proj, up_proj); hf_transposed: HF
  // stores it [in, out] (GPT-2's Conv1D). The vocabulary tensors hold V rows in HF files, Vp here.
  std::vector<std::string> hf_names;
  bool hf_transposed = false;

  // Elements of one layer's slice (the whole tensor if not per-layer).
  int64_t layer_numel() const { return per_layer ? shape.numel() / shape[0] : shape.numel(); }
};

struct ModelSpec {
  GptConfig config;
  std::vector<ParamSpec> params;     // in checkpoint order (GPT-2: llm.c's 16 tensors)
  std::vector<LinearSpec> linears;   // one block's tensor-parallel linears, in forward order
  Norm norm = Norm::kLayerNorm;      // every norm of the model (blocks and final)
  int token_embedding = -1;          // the kVocab tensor the inputs look up
  int lm_head = -1;                  // the kVocab tensor the logits use (= token_embedding when tied)
  int position_embedding = -1;       // GPT-2's, or -1
  int final_norm = -1, final_norm_bias = -1;  // the final norm's weight (and bias, or -1)

  // Index of the tensor called `name`; InvalidArgument naming the model's tensors otherwise.
  int index(std::string_view name) const;
  int64_t num_parameters() const;
  // Grid axes (ReplicaAxis) over which ranks hold identical shards of tensor i.
  unsigned replica_axes(int i) const;
};

// Why a grid with these tensor-parallel extents cannot hold the model, or nullopt: the hidden size must
// divide over X; the heads (and a Llama's KV heads, which Y splits with their query heads, and its MLP
// features) over Y (the message lists the Gy values that work); every linear's weight block over Z.
// `category` is short (for a summary of many grids), `message` says what to change.
struct GridMisfit {
  std::string category, message;
};
std::optional<GridMisfit> grid_misfit(const ModelSpec& spec, long gx, long gy, long gz);

// The parameters of a model of this config, in checkpoint order. GPT-2: llm.c's wte wpe ln1w ln1b qkvw
// qkvb attprojw attprojb ln2w ln2b fcw fcb fcprojw fcprojb lnfw lnfb. Llama: embed_tokens
// input_layernorm qkv_proj o_proj post_attention_layernorm gate_up_proj down_proj norm [lm_head].
ModelSpec model_spec(const GptConfig& config);

// The gradient sums over Z·data of the tensors whose gradients complete at `stage` (every tensor but
// the linears' weights, which their reduce-scatter summed over Z and which are summed over data
// alone): the stage's norms and biases packed in one bucket, in the tensor list's order, then each
// vocabulary or position embedding a bucket of its own, in the order the backward completes them (the
// last in the list first). Indices in spec.params. The model's GradientSync issues these buckets; the
// planner prices them.
std::vector<std::vector<int>> zdata_grad_buckets(const ModelSpec& spec, Stage stage);

// Reserves the model's full parameter tensors in an arena, in the spec's order (slot i is tensor i).
void reserve_params(Arena& arena, const ModelSpec& spec);

// Names of Hugging Face's tensors for layer `layer` ("{i}" replaced).
std::string hf_name_of_layer(const std::string& pattern, int layer);

}  // namespace axonn::model
