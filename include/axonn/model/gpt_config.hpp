// model/gpt_config.hpp — the shape of a GPT-2 model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::model {

struct GptConfig {
  int max_seq_len = 1024;        // maxT: positions the model has embeddings for
  int vocab_size = 50257;        // V
  int padded_vocab_size = 50304; // Vp >= V: the embedding/LM-head rows, padded for fast GEMMs
  int num_layers = 12;           // L
  int num_heads = 12;            // NH
  int channels = 768;            // C

  // Throws InvalidArgument naming the bad field and what to change.
  void validate() const;
  // Parameters in the llm.c layout (with the padded vocabulary).
  int64_t num_parameters() const;
  std::string str() const;
};

// V rounded up to a multiple of `multiple` (llm.c: 128).
int pad_vocab(int vocab_size, int multiple = 128);

// Named presets: gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m (OpenAI's GPT-2 family), and
// gpt2-tiny (the shape of shared/reference/gpt2-tiny); Hugging Face's names gpt2, gpt2-medium,
// gpt2-large, gpt2-xl (as in `axonn plan`) are aliases. Throws InvalidArgument for other names.
GptConfig gpt_preset(std::string_view name);
std::vector<std::string> gpt_preset_names();

}  // namespace axonn::model
