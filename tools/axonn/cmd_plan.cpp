// axonn plan — rank the 4D grids (Gx, Gy, Gz, Gdata) for a GPT-2 or Llama model on a machine, with the
// planner's performance model (docs/perf-model.md). Needs no MPI and no GPU; thin wiring over
// axonn::planner.
//
//   axonn plan --model 80B --gpus 1024 --batch-size 1024 --machine perlmutter
//   axonn plan --layers 24 --hidden 2048 --heads 16 --gpus 64 --batch-size 256 --format json
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/hf.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/spelling.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/planner/planner.hpp"
#include "axonn/model/gpt_config.hpp"
#include "commands.hpp"

namespace axonn::tools {

namespace {

constexpr long kDefaultVocab = 50304;  // GPT-2 BPE (50257) padded to a multiple of 128

struct PlanOptions {
  std::string machine = "perlmutter";
  std::string model;
  std::string model_config;  // a Hugging Face config.json as the shape
  long layers = 0, hidden = 0, heads = 0, vocab = 0;
  int kv_heads = 0, ffn = 0;
  double rope_theta = 0.0;
  std::string tie_embeddings;
  long seq_len = planner::kDefaultSeqLen;
  long batch_size = 0;
  long gpus = 0;
  long min_tp = 0;
  long top = 5;
  std::string variant = "corrected";
  std::string format = "table";
  std::string grid_order = "x,y,z";
  bool search_memory = false;
  // the two-level network, overriding the profile's (0: the profile's value)
  long ranks_per_node = 0;
  double intra_node_gbs = 0, inter_node_gbs = 0, intra_node_latency_us = -1, inter_node_latency_us = -1;
};

// --ranks-per-node and the link flags: the node size, and a two-level network that replaces the
// profile's table (every collective then priced by where its ranks sit: inside a node or across).
void apply_network_flags(const PlanOptions& o, planner::MachineProfile* m) {
  AXONN_CHECK_ARG(o.ranks_per_node >= 0 && o.intra_node_gbs >= 0 && o.inter_node_gbs >= 0,
                  "--ranks-per-node, --intra-node-gbs and --inter-node-gbs must be positive (0: the profile's)");
  if (o.ranks_per_node > 0) m->gpus_per_node = o.ranks_per_node;
  const bool links = o.intra_node_gbs > 0 || o.inter_node_gbs > 0 || o.intra_node_latency_us >= 0 ||
                     o.inter_node_latency_us >= 0;
  if (!links) return;
  m->bandwidth_table.clear();
  if (o.intra_node_gbs > 0) m->intra_node_gbs = o.intra_node_gbs;
  if (o.inter_node_gbs > 0) m->inter_node_gbs = o.inter_node_gbs;
  if (o.intra_node_latency_us >= 0) m->intra_node_latency_us = o.intra_node_latency_us;
  if (o.inter_node_latency_us >= 0) m->inter_node_latency_us = o.inter_node_latency_us;
  m->description = detail::concat("two-level network from the command line: ", m->gpus_per_node,
                                  " ranks per node, ", m->intra_node_gbs, " GB/s inside, ", m->inter_node_gbs,
                                  " GB/s between nodes");
}

std::string known_model_names() {
  std::ostringstream os;
  const char* sep = "";
  for (const auto& m : planner::known_models()) {
    os << sep << m.name;
    sep = ", ";
  }
  return os.str();
}

// --model NAME gives the shape; explicit --layers/--hidden/--heads/--vocab override it. Without
// --model, the first three are required (a GPT-2-shaped model).
planner::ModelShape resolve_model(const PlanOptions& o) {
  planner::ModelShape m;
  AXONN_CHECK_ARG(o.model.empty() || o.model_config.empty(),
                  "give the shape either as --model NAME or as --model-config config.json, not both");
  if (!o.model_config.empty()) {
    m.name = o.model_config;
    m.config = checkpoint::parse_hf_config_json(checkpoint::read_text_file(o.model_config), o.model_config);
  } else if (!o.model.empty()) {
    auto found = planner::find_model(o.model);
    if (!found) {
      std::vector<std::string> names;
      for (const planner::ModelShape& k : planner::known_models()) names.push_back(k.name);
      const std::optional<std::string> near = nearest_word(o.model, names);
      throw InvalidArgument(::axonn::detail::concat("unknown --model '", o.model, "'; ",
                                                    near ? "did you mean " + *near + "? " : std::string(),
                                                    "known models: ", known_model_names(),
                                                    "; or give --layers, --hidden, --heads (and --vocab) instead"));
    }
    m = *found;
  } else {
    AXONN_CHECK_ARG(o.layers > 0 && o.hidden > 0 && o.heads > 0, "give --model NAME (", known_model_names(),
                    ") or all of --layers, --hidden and --heads", " (--vocab defaults to ", kDefaultVocab, ")");
    m = planner::gpt_shape("", o.layers, o.hidden, o.heads, kDefaultVocab);
  }
  model::GptConfig& c = m.config;
  if (o.layers != 0) c.num_layers = static_cast<int>(o.layers);
  if (o.hidden != 0) c.channels = static_cast<int>(o.hidden);
  if (o.heads != 0) c.num_heads = static_cast<int>(o.heads);
  if (o.vocab != 0) c.vocab_size = c.padded_vocab_size = static_cast<int>(o.vocab);
  // the Llama shape flags `axonn train` has, with the same names and meaning (model::apply_shape)
  model::ShapeOverrides shape;
  shape.kv_heads = o.kv_heads;
  shape.ffn = o.ffn;
  shape.rope_theta = o.rope_theta;
  shape.tie_embeddings = o.tie_embeddings;
  if (shape.any()) c = model::apply_shape(c, shape);
  if ((!o.model.empty() || !o.model_config.empty()) &&
      (o.layers != 0 || o.hidden != 0 || o.heads != 0 || o.vocab != 0 || shape.any()))
    m.name += " (modified)";
  return m;
}

int run_plan(const PlanOptions& o) {
  AXONN_CHECK_ARG(o.top >= 0, "--top must be 0 (all) or positive, got ", o.top);
  planner::PlanRequest req;
  req.workload.model = resolve_model(o);
  req.workload.seq_len = o.seq_len;
  req.workload.batch_size = o.batch_size;
  req.gpus = o.gpus;
  req.min_tp = o.min_tp != 0 ? o.min_tp : req.workload.model.min_tp;
  // the model's own floor, not one the user gave: say where it comes from and how to pass it
  AXONN_CHECK_ARG(o.min_tp != 0 || o.gpus < 1 || req.min_tp <= o.gpus, "the model ", o.model.empty() ? "of this shape" : o.model, " is planned on at least ",
                  req.min_tp, " GPUs sharing one copy of its weights (Gx*Gy*Gz; AxoNN's launcher's floor for it), ",
                  "more than --gpus ", o.gpus, ": use ", req.min_tp, " GPUs or more, or give --min-tp N to search ",
                  "grids of fewer (they are marked when they do not fit in memory)");
  planner::MachineProfile machine = planner::load_machine_profile(o.machine);
  apply_network_flags(o, &machine);
  req.settings = planner::settings_for(machine);  // the implementation the profile runs
  req.settings.variant = planner::parse_model_variant(o.variant);
  if (o.grid_order == "all") {
    AXONN_CHECK_ARG(req.settings.variant == planner::ModelVariant::kCorrected,
                    "--grid-order all needs the corrected model: AxoNN's comm_model.py (as-coded) knows only x,y,z");
    req.search_orders = true;
  } else {
    req.order = layout::parse_grid_order(o.grid_order);
  }

  req.search_memory = o.search_memory;
  const planner::PlanResult r = planner::plan(machine, req);
  const auto top = static_cast<std::size_t>(o.top);
  std::cout << (o.format == "json" ? planner::to_json(r, top) : planner::format_table(r, top) + planner::explain_plan(r))
            << std::flush;

  if (r.fitting == 0) {
    // Every grid is printed above, marked; the run itself still fails so scripts notice.
    const planner::Estimate* least = &r.configs.front();
    for (const auto& e : r.configs)
      if (e.memory.total() < least->memory.total()) least = &e;
    throw InvalidArgument(
        detail::concat("no grid fits in ", req.settings.memory_headroom * machine.memory_gib, " GiB per GPU (",
                       100 * req.settings.memory_headroom, "% of ", machine.memory_gib, " GiB on ", machine.name,
                       "); the smallest needs ", least->memory.total_gib(), " GiB at ", planner::to_string(least->grid),
                       ". Use more --gpus, a smaller --batch-size or --seq-len, or a machine with more memory",
                       req.search_memory || req.settings.variant != planner::ModelVariant::kCorrected
                           ? ""
                           : "; or plan with --search-memory (smaller micro-batches, activation recompute)"));
  }
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& app, Action* action) {
  auto o = std::make_shared<PlanOptions>();
  auto* sub = app.add_subcommand(
      "plan", "rank the 4D grids (Gx, Gy, Gz, Gdata) for a GPT-2 or Llama model by predicted step time and memory");
  sub->footer("Example:\n  axonn plan --model gpt2-xl --gpus 64 --batch-size 512 --machine perlmutter");
  sub->add_option("--machine", o->machine,
                  "machine profile: built-in name (alps, frontier, perlmutter), a NAME.json on "
                  "$AXONN_PROFILE_PATH or ~/.config/axonn/profiles, or a .json file")
      ->capture_default_str();
  sub->add_option("--model", o->model,
                  "model name (or give the shape below): " + model::gpt_preset_help());
  sub->add_option("--layers", o->layers, "transformer layers L (0: from --model)")->capture_default_str();
  sub->add_option("--hidden,--channels", o->hidden, "hidden size H, as train's --channels (0: from --model)")
      ->capture_default_str();
  sub->add_option("--kv-heads", o->kv_heads, "Llama: key/value heads of grouped-query attention (0: from --model)")
      ->capture_default_str();
  sub->add_option("--ffn", o->ffn, "Llama: the MLP's intermediate size (0: from --model)")
      ->capture_default_str();
  sub->add_option("--rope-theta", o->rope_theta, "Llama: RoPE's base theta (0: from --model)")
      ->capture_default_str();
  sub->add_option("--tie-embeddings", o->tie_embeddings, "Llama: on|off, the LM head tied to the token embedding");
  sub->add_option("--model-config", o->model_config,
                  "a Hugging Face config.json (GPT2LMHeadModel or LlamaForCausalLM) as the model, instead of --model");
  sub->add_option("--heads", o->heads, "attention heads (0: from --model)")->capture_default_str();
  sub->add_option("--vocab", o->vocab, "vocabulary size V, padded (0: from --model, else 50304)")
      ->capture_default_str();
  sub->add_option("--seq-len", o->seq_len, "sequence length S")->capture_default_str();
  sub->add_option("--batch-size", o->batch_size, "global batch in sequences per optimizer step")->required();
  sub->add_option("--gpus", o->gpus, "number of GPUs G = Gx*Gy*Gz*Gdata")->required();
  sub->add_option("--min-tp", o->min_tp, "minimum Gx*Gy*Gz (0: the model's value from AxoNN's launcher, else 1)")
      ->capture_default_str();
  sub->add_option("--top", o->top, "configurations to print, best first (0: all)")->capture_default_str();
  sub->add_option("--model-variant", o->variant,
                  "corrected (default), or as-coded: AxoNN's comm_model.py exactly, ranked by its "
                  "communication time")
      ->check(CLI::IsMember({"corrected", "as-coded"}))
      ->capture_default_str();
  sub->add_option("--grid-order", o->grid_order,
                  "rank order of X, Y, Z, fastest first (x,y,z: AxoNN's), or all: every order that places a "
                  "grid's groups differently, each ranked")
      ->capture_default_str();
  sub->add_option("--ranks-per-node", o->ranks_per_node, "ranks (GPUs) per node (0: the profile's)")
      ->capture_default_str();
  sub->add_option("--intra-node-gbs", o->intra_node_gbs,
                  "bus bandwidth inside a node, GB/s; any link flag replaces the profile's bandwidth table by "
                  "this two-level network (0: the profile's fallback)")
      ->capture_default_str();
  sub->add_option("--inter-node-gbs", o->inter_node_gbs, "bandwidth of a node's link to the others, GB/s")
      ->capture_default_str();
  sub->add_option("--intra-node-latency-us", o->intra_node_latency_us, "latency per ring step inside a node "
                  "(-1: the profile's)")
      ->capture_default_str();
  sub->add_option("--inter-node-latency-us", o->inter_node_latency_us, "latency per ring step between nodes")
      ->capture_default_str();
  sub->add_flag("--search-memory", o->search_memory,
                "each grid at its fastest micro-batch size and activation recompute that fit (columns mbs and rc), "
                "instead of one micro-batch of the rank's sequences and the machine's recompute setting");
  sub->add_option("--format", o->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  sub->callback([action, o] { *action = [o] { return run_plan(*o); }; });
}

}  // namespace axonn::tools
