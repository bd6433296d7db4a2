// checkpoint/llmc.hpp — llm.c's model checkpoint format (spec/formats.md).
//
// A 256 x int32 header (magic 20240326; version 3 = fp32, 5 = bf16; maxT, V, L, NH, C, Vp) and
// then llm.c's 16 parameter tensors in order (GPT-2 only: model::Param's order, model_spec's for the
// gpt2 family). Both versions load into fp32 parameters; saving
// writes version 3 (or 5), to a temporary file renamed into place, so a crash never leaves a
// half-written checkpoint under the final name.
//
//   model::GptConfig cfg = checkpoint::read_llmc_config(path);
//   model::Gpt gpt(cfg, B, T, backend);
//   checkpoint::load_llmc_params(path, cfg, gpt.params());
#pragma once

#include <functional>
#include <string>

#include "axonn/core/progress.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::checkpoint {

constexpr int kLlmcModelMagic = 20240326;

// Reads and validates the header; throws IoError (missing, truncated, wrong magic or version, bad
// sizes) naming the file and the problem.
model::GptConfig read_llmc_config(const std::string& path);
// Reads every parameter tensor, one layer at a time for the per-layer ones, widened to fp32, and
// hands each to consume(tensor, layer, data), tensor = its index in model_spec (model::Param);
// non-per-layer tensors come as layer 0. Memory: one layer's tensor at a time, so every rank of a
// large grid can take its shard from the file.
void read_llmc_tensors(const std::string& path, const model::GptConfig& config,
                       const std::function<void(int, int, const float*)>& consume);
// Reads the parameters into an arena laid out by model::reserve_params for `config`. `progress`, if any,
// counts the arena's bytes filled.
void load_llmc_params(const std::string& path, const model::GptConfig& config, Arena& params,
                      Progress* progress = nullptr);
// Writes a checkpoint (version 3 fp32, or 5 bf16) of a GPT-2 model (InvalidArgument for another) atomically: temporary file, fsync, rename, fsync
// of the directory (checkpoint/atomic_file.hpp).
// `progress`, if any, counts the tensors' bytes written (as stored: 4 or 2 per parameter).
void save_llmc(const std::string& path, const model::GptConfig& config, const Arena& params, int version = 3,
               Progress* progress = nullptr);

}  // namespace axonn::checkpoint
