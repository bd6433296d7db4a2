// What `--init` names, and loading its weights onto a grid (checkpoint/model_source.hpp).
#include "axonn/checkpoint/model_source.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <vector>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/gguf.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/core/error.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::checkpoint {

namespace fs = std::filesystem;

ModelSource::Kind model_source_kind(const std::string& path) {
  std::error_code ec;
  if (is_hf_model_dir(path)) {
    if (holds_checkpoints(path)) {
      const std::vector<int64_t> steps = list_checkpoints(path);
      const std::string what = steps.empty()       ? "a checkpoint (its manifest.json or `latest`)"
                               : steps.size() == 1 ? "the checkpoint of step " + std::to_string(steps.front())
                                                   : "checkpoints of steps " + std::to_string(steps.front()) + " to " +
                                                         std::to_string(steps.back());
      throw InvalidArgument("'" + path + "' holds both a Hugging Face model (" + std::string(kHfConfigName) +
                            " and its weights) and " + what + ": which one to read is not clear. Name a step " +
                            "directory (" + (fs::path(path) / "step-NNNNNNNN").string() + ") for a checkpoint, " +
                            "or move the Hugging Face files into a directory of their own");
    }
    return ModelSource::Kind::kHuggingFace;
  }
  if (fs::is_directory(path, ec)) return ModelSource::Kind::kCheckpoint;
  if (looks_like_safetensors(path)) return ModelSource::Kind::kHuggingFace;
  if (looks_like_gguf(path)) return ModelSource::Kind::kGguf;
  return ModelSource::Kind::kLlmc;
}

ModelSource find_model_source(const std::string& path) {
  ModelSource s;
  s.path = path;
  s.kind = model_source_kind(path);
  switch (s.kind) {
    case ModelSource::Kind::kHuggingFace:
      s.config = HfCheckpoint(path).config();
      break;
    case ModelSource::Kind::kCheckpoint:
      s.path = resolve_checkpoint(path);
      s.config = read_manifest(s.path).model;
      break;
    case ModelSource::Kind::kGguf:
      s.gguf = std::make_shared<const GgufModel>(path);
      s.config = s.gguf->config();
      break;
    case ModelSource::Kind::kLlmc:
      s.config = read_llmc_config(path);
      break;
  }
  return s;
}

std::string carried_tokenizer_dir(const ModelSource& source) {
  std::string dir;
  if (source.kind == ModelSource::Kind::kCheckpoint) dir = source.path;
  if (source.kind == ModelSource::Kind::kHuggingFace) {
    std::error_code ec;
    const fs::path p(source.path);
    dir = (fs::is_directory(p, ec) ? p : p.has_parent_path() ? p.parent_path() : fs::path(".")).string();
  }
  return !dir.empty() && !text::tokenizer_files_in(dir).empty() ? dir : "";
}

namespace {

// Loads a model whose reader delivers its weights by ranges (HF, GGUF): every rank reads the file by pieces and
// keeps its shard's part of each; a device model takes one layer of one tensor at a time, assembled on the host.
void load_by_ranges(const std::function<void(const TensorRangeSink&)>& load_ranges, model::Gpt& gpt) {
  if (gpt.device() == Device::kCpu) {
    load_ranges([&](int t, int layer, int64_t first, int64_t count, const float* values) {
      gpt.load_full_range(t, layer, first, count, values);
    });
    return;
  }
  struct Slice {
    std::vector<float> values;
    int64_t filled = 0;
  };
  std::map<std::pair<int, int>, Slice> open;  // by (tensor, layer): those not complete yet
  load_ranges([&](int t, int layer, int64_t first, int64_t count, const float* values) {
    const int64_t numel = gpt.full_layer_numel(t);
    Slice& s = open[{t, layer}];
    if (s.values.empty()) s.values.assign(static_cast<size_t>(numel), 0.0f);
    std::copy_n(values, count, s.values.begin() + first);
    s.filled += count;
    if (s.filled == numel) {
      gpt.load_full_layer(t, layer, s.values.data());
      open.erase({t, layer});
    }
  });
  AXONN_CHECK(open.empty(), "the reader left ", open.size(), " layer slices incomplete");
}

}  // namespace

std::string load_weights(const ModelSource& source, const parallel::Grid& grid, model::Gpt& gpt) {
  const model::GptConfig& mc = gpt.config();
  switch (source.kind) {
    case ModelSource::Kind::kLlmc:
      read_llmc_tensors(source.path, mc, [&](int t, int layer, const float* full) {
        gpt.load_full_layer(t, layer, full);
      });
      return "weights of the llm.c model " + source.path;
    case ModelSource::Kind::kHuggingFace: {
      const HfCheckpoint hf(source.path);
      load_by_ranges([&](const TensorRangeSink& sink) { hf.load_ranges(sink); }, gpt);
      return "weights of the Hugging Face checkpoint " + source.path;
    }
    case ModelSource::Kind::kGguf: {
      const GgufModel& gguf = *source.gguf;
      load_by_ranges([&](const TensorRangeSink& sink) { gguf.load_ranges(sink); }, gpt);
      return "weights of the " + gguf.kind() + " file " + source.path;
    }
    case ModelSource::Kind::kCheckpoint: {
      LoadResult r;
      if (gpt.device() == Device::kCpu && gpt.keeps_fp32_weights()) {
        r = load_sharded(source.path, grid, mc, gpt.params());
        gpt.weights_updated();
      } else {  // through a host copy: uploaded, or rounded into a bf16 inference model's weights
        Arena host = gpt.params().clone_layout("parameters (host copy)", Device::kCpu);
        host.allocate();
        r = load_sharded(source.path, grid, mc, host);
        gpt.load_params(host);
      }
      return "weights of " + r.dir + " (step " + std::to_string(r.manifest.step) + ", grid " + r.manifest.grid.str() +
             ")";
    }
  }
  return "";
}

}  // namespace axonn::checkpoint
