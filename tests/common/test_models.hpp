// Small models the parallel tests run on every grid (include "common/test_models.hpp"): a GPT-2 and
// two Llamas, with a vocabulary of 70 padded to 128 (split unevenly over X*Y on some grids, evenly on
// the powers of two) and 9 positions.
#pragma once

#include "axonn/model/gpt_config.hpp"

namespace axonn::test {

// GPT-2: L=2, 4 heads, C=16.
inline model::GptConfig tiny_gpt2() {
  model::GptConfig c;
  c.max_seq_len = 9;
  c.vocab_size = 70;
  c.padded_vocab_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.channels = 16;
  return c;
}

// Llama with grouped-query attention (2 KV heads for 4 query heads, so Gy <= 2), an untied head.
inline model::GptConfig tiny_llama_gqa() {
  model::GptConfig c = tiny_gpt2();
  c.family = model::Family::kLlama;
  c.num_kv_heads = 2;
  c.ffn_hidden = 24;
  c.tied_embeddings = false;
  return c;
}

// Llama with 4 KV heads for 8 query heads (Gy up to 4), tied embeddings and llama3 rope scaling whose
// original context is short enough that the positions reach every regime of the rescaling.
inline model::GptConfig tiny_llama_tied_scaled() {
  model::GptConfig c = tiny_gpt2();
  c.family = model::Family::kLlama;
  c.channels = 32;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.ffn_hidden = 40;
  c.rope_theta = 100.0;
  c.rope_scaling = {4.0, 1.0, 4.0, 8};
  c.tied_embeddings = true;
  return c;
}

}  // namespace axonn::test
