// What `--init` names, and loading its weights onto a grid (train/model_source.hpp).
#include "axonn/train/model_source.hpp"

#include <filesystem>

#include "axonn/checkpoint/checkpoint_dir.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/checkpoint/sharded.hpp"
#include "axonn/core/error.hpp"

namespace axonn::train {

namespace fs = std::filesystem;

ModelSource find_model_source(const std::string& path) {
  ModelSource s;
  s.path = path;
  std::error_code ec;
  if (checkpoint::is_hf_model_dir(path)) {
    s.kind = ModelSource::Kind::kHuggingFace;
    s.config = checkpoint::HfCheckpoint(path).config();
  } else if (fs::is_directory(path, ec)) {
    s.kind = ModelSource::Kind::kCheckpoint;
    s.path = checkpoint::resolve_checkpoint(path);
    s.config = checkpoint::read_manifest(s.path).model;
  } else if (checkpoint::looks_like_safetensors(path)) {
    s.kind = ModelSource::Kind::kHuggingFace;
    s.config = checkpoint::HfCheckpoint(path).config();
  } else {
    s.kind = ModelSource::Kind::kLlmc;
    s.config = checkpoint::read_llmc_config(path);
  }
  return s;
}

std::string load_weights(const ModelSource& source, const parallel::Grid& grid, model::Gpt& gpt) {
  const model::GptConfig& mc = gpt.config();
  switch (source.kind) {
    case ModelSource::Kind::kLlmc:
      checkpoint::read_llmc_tensors(source.path, mc, [&](int t, int layer, const float* full) {
        gpt.load_full_layer(t, layer, full);
      });
      return "weights of the llm.c model " + source.path;
    case ModelSource::Kind::kHuggingFace: {
      // the whole model on every rank for a moment; each keeps its shard
      Arena full("init");
      model::reserve_params(full, gpt.spec());
      full.allocate();
      checkpoint::HfCheckpoint(source.path).load(full);
      for (int i = 0; i < static_cast<int>(gpt.spec().params.size()); i++) {
        const bool per_layer = gpt.spec().params[static_cast<size_t>(i)].per_layer;
        Tensor t = full.tensor(static_cast<size_t>(i));
        for (int l = 0; l < (per_layer ? mc.num_layers : 1); l++)
          gpt.load_full_layer(i, l, per_layer ? t[l].f32() : t.f32());
      }
      return "weights of the Hugging Face checkpoint " + source.path;
    }
    case ModelSource::Kind::kCheckpoint: {
      checkpoint::LoadResult r;
      if (gpt.device() == Device::kCpu) {
        r = checkpoint::load_sharded(source.path, grid, mc, gpt.params());
      } else {
        Arena host = gpt.params().clone_layout("parameters (host copy)", Device::kCpu);
        host.allocate();
        r = checkpoint::load_sharded(source.path, grid, mc, host);
        gpt.params().copy_from(host);  // upload
      }
      gpt.weights_updated();
      return "weights of " + r.dir + " (step " + std::to_string(r.manifest.step) + ", grid " + r.manifest.grid.str() +
             ")";
    }
  }
  return "";
}

}  // namespace axonn::train
