// src/checkpoint/hf_pieces.hpp (private to the checkpoint library) — the tensors of a model as Hugging
// Face files name and cut them, shared by the HF writer and reader (hf.cpp) and the GGUF writer (gguf.cpp),
// whose tensors are HF's under other names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace axonn::checkpoint::detail
