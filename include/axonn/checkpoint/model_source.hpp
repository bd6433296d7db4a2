// checkpoint/model_source.hpp — a trained model on disk, as `axonn train --init` and `axonn generate --init`
// take it: an llm.c model file (GPT-2), a Hugging Face checkpoint (a model directory with config.json,
// or a .safetensors file; GPT-2 or Llama), a GGUF file (llama.cpp's; gguf.hpp's GgufModel) or a checkpoint
// directory of ours (a run's checkpoint directory, whose `latest` is taken, or one step directory).
//
//   checkpoint::ModelSource src = checkpoint::find_model_source(path);   // reads headers and manifests only
//   model::Gpt gpt(src.config, grid, B, T, backend);
//   checkpoint::load_weights(src, grid, gpt);                        // collective over the grid
#pragma once

#include <memory>
#include <string>

#include "axonn/model/gpt.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/parallel/grid.hpp"

namespace axonn::checkpoint {

class GgufModel;

struct ModelSource {
  enum class Kind { kLlmc, kHuggingFace, kGguf, kCheckpoint };
  Kind kind = Kind::kLlmc;
  std::string path;        // kCheckpoint: the step directory the given path resolves to
  model::GptConfig config;  // the model the files hold
  // kGguf: the file, opened and checked once (its configuration, then its weights and tokenizer)
  std::shared_ptr<const GgufModel> gguf;
};

// The kind of model `path` holds, from what it is (no configuration read): a directory with config.json and
// weights is a Hugging Face model, any other directory a checkpoint, a safetensors file a Hugging Face model,
// a file with GGUF's magic a GGUF model, another file an llm.c model file. A directory that is both a Hugging
// Face model and a checkpoint directory
// (holds_checkpoints) is refused with InvalidArgument: which of the two a user means is not clear, and the HF
// files would be read in the place of checkpoints that have moved on since they were written.
ModelSource::Kind model_source_kind(const std::string& path);

// Tells the kind from the path (model_source_kind) and reads the model's configuration (the same on every
// rank). Throws IoError naming the file and what is wrong with it.
ModelSource find_model_source(const std::string& path);

// The directory of the tokenizer files a model carries (text::tokenizer_files_in): a Hugging Face model's
// directory (a .safetensors file's), a checkpoint step (train copies the prepared data's tokenizer into each);
// "" where it has none, and for an llm.c file or a GGUF file (which holds its tokenizer inside: GgufModel).
std::string carried_tokenizer_dir(const ModelSource& source);

// Sets gpt's weights from the source: each rank keeps its shards (a checkpoint directory is resharded
// to gpt's grid). `grid` is the one the checkpoint's collectives use: its communicators take host
// buffers; a model in device memory is loaded through a host copy. Collective over the grid for
// kCheckpoint. Returns a line for the log: what was loaded.
std::string load_weights(const ModelSource& source, const parallel::Grid& grid, model::Gpt& gpt);

}  // namespace axonn::checkpoint
