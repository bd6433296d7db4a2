// checkpoint/hf_gpt2.hpp — GPT-2 weights in Hugging Face's names and layouts (safetensors).
//
// Hugging Face's GPT2Model stores, per layer i, `h.{i}.ln_1.weight`, `h.{i}.attn.c_attn.weight`, ...
// Its attention and MLP projections are Conv1D modules whose weight is (in, out): the transpose of
// llm.c's nn.Linear layout (out, in). The mapping from llm.c's 16 tensors (model::Param), per layer:
//
//   ln1w, ln1b         h.{i}.ln_1.weight, .bias           [C]
//   qkvw [3C, C]       h.{i}.attn.c_attn.weight           [C, 3C]   transposed
//   qkvb               h.{i}.attn.c_attn.bias             [3C]
//   attprojw [C, C]    h.{i}.attn.c_proj.weight           [C, C]    transposed
//   attprojb           h.{i}.attn.c_proj.bias             [C]
//   ln2w, ln2b         h.{i}.ln_2.weight, .bias           [C]
//   fcw [4C, C]        h.{i}.mlp.c_fc.weight              [C, 4C]   transposed
//   fcb                h.{i}.mlp.c_fc.bias                [4C]
//   fcprojw [C, 4C]    h.{i}.mlp.c_proj.weight            [4C, C]   transposed
//   fcprojb            h.{i}.mlp.c_proj.bias              [C]
// and wte [Vp, C] -> wte.weight [V, C] (the padding rows dropped), wpe -> wpe.weight, lnfw/lnfb ->
// ln_f.weight/bias. The LM head is tied to wte (no lm_head.weight is written). The model's shape goes
// in __metadata__ (n_layer, n_head, n_embd, vocab_size, n_positions, and our padded_vocab_size so an
// llm.c file round-trips exactly), with "format": "pt", which transformers' loader requires.
//
//   checkpoint::save_hf_gpt2("model.safetensors", cfg, gpt.params());
//   checkpoint::SafetensorsFile f("model.safetensors");
//   model::GptConfig cfg = checkpoint::read_hf_gpt2_config(f);
//   checkpoint::load_hf_gpt2_params(f, cfg, params);   // params laid out by reserve_gpt_params
#pragma once

#include <string>

#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::checkpoint {

// Writes `params` (laid out by model::reserve_gpt_params for `config`) as an HF GPT-2 safetensors
// file, F32, atomically. Padding rows of wte beyond vocab_size are not written; they are zero in
// every model axonn or llm.c makes (and come back as zero on import).
FileDigest save_hf_gpt2(const std::string& path, const model::GptConfig& config, const Arena& params);

// The model shape of an HF GPT-2 file: layers, channels, vocabulary and positions from the tensor
// shapes; the metadata, when present, must agree with them. The number of heads (which no tensor
// shape shows) comes from the metadata's n_head, else from `num_heads` if > 0, else from n_head in a
// config.json beside the file (HF's model directories have one). The padded vocabulary is the
// metadata's padded_vocab_size if present, else V rounded up to 128 (llm.c's). Throws IoError naming
// the file and what is missing or inconsistent.
model::GptConfig read_hf_gpt2_config(const SafetensorsFile& f, int num_heads = 0);

// Reads every tensor into `params` (laid out by model::reserve_gpt_params for `config`), transposing
// the Conv1D weights; F32 or BF16 (widened exactly) sources. Accepts HF's "transformer." name prefix
// and skips the non-parameter buffers HF files may hold (attn.bias, attn.masked_bias) and a tied
// lm_head.weight; any other tensor, a missing one, or a wrong shape is an IoError.
void load_hf_gpt2_params(const SafetensorsFile& f, const model::GptConfig& config, Arena& params);

// The config.json transformers needs beside model.safetensors to load it as GPT2LMHeadModel.
std::string hf_gpt2_config_json(const model::GptConfig& config);

}  // namespace axonn::checkpoint
