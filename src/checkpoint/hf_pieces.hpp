// src/checkpoint/hf_pieces.hpp (private to the checkpoint library) — the tensors of a model as Hugging
// Face files name and cut them, shared by the HF writer and reader (hf.cpp) and the GGUF writer (gguf.cpp),
// whose tensors are HF's under other names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/checkpoint/hf.hpp"
#include "axonn/model/spec.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::checkpoint::detail {

// One HF tensor of one (layer slice of a) parameter tensor: rows [row0, row0 + rows) of the slice
// [R, cols] (its output part, or the first V rows of a vocabulary tensor), transposed in the file
// for GPT-2's Conv1D weights.
struct HfPiece {
  std::string name;
  int t = 0, layer = 0;
  int64_t row0 = 0, rows = 0, cols = 0;  // cols 0: a 1-D tensor (biases, norms)
  bool transposed = false;
  std::vector<int64_t> shape() const {
    if (cols == 0) return {rows};
    return transposed ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{rows, cols};
  }
  int64_t numel() const { return rows * (cols ? cols : 1); }
};

// Every HF tensor of the model, in HF's file order: the tensors before the first per-layer one, the
// layers (each with its tensors in the spec's order), the rest.
std::vector<HfPiece> hf_pieces(const model::ModelSpec& spec);

// The first element of a piece's rows in its parameter tensor (within the arena slot).
const float* piece_source(const Arena& params, const model::ModelSpec& spec, const HfPiece& p);

// A sink that writes what a reader delivers into `params` (model::reserve_params layout for the spec's
// model), host or device memory.
TensorRangeSink arena_sink(Arena& params, const model::ModelSpec& spec);

// Delivers the padded vocabulary rows [V, Vp) of the token embedding (and an untied LM head) as zeros, as
// every model axonn or llm.c makes has them: the files of HF and GGUF leave them out.
void sink_vocab_padding(const model::GptConfig& config, const model::ModelSpec& spec, const TensorRangeSink& sink);

}  // namespace axonn::checkpoint::detail
