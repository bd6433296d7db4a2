// Output of a plan: the JSON of `axonn plan --format json` and the human-readable table.
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "axonn/planner/planner.hpp"

namespace axonn::planner {

namespace {

std::size_t shown(const PlanResult& r, std::size_t top) {
  return top == 0 ? r.configs.size() : std::min(top, r.configs.size());
}

// Whether the plan says which rank order each grid has (only when it was asked about the order).
bool with_orders(const PlanResult& r) {
  return r.request.search_orders || r.request.order != layout::kAxonnGridOrder;
}

__attribute__((format(printf, 2, 3))) void appendf(std::string* out, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  out->append(buf);
}

}  // namespace

std::string to_json(const PlanResult& r, std::size_t top) {
  nlohmann::ordered_json configs = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < shown(r, top); ++i) {
    const Estimate& e = r.configs[i];
    configs.push_back({{"gx", e.grid.gx},
                       {"gy", e.grid.gy},
                       {"gz", e.grid.gz},
                       {"gdata", e.grid.gdata},
                       {"comm_s", e.comm_s},
                       {"compute_s", e.compute_s},
                       {"total_s", e.total_s},
                       {"mem_gib", e.memory.total_gib()},
                       {"fits", e.fits}});
    if (with_orders(r)) configs.back()["order"] = layout::grid_order_str(e.grid.order);
    if (r.request.search_memory) {  // what the search chose for the grid
      configs.back()["micro_batch_size"] = micro_batch_size(r.request.workload, e);
      configs.back()["recompute"] = e.recompute;
    }
  }
  nlohmann::ordered_json doc = {{"configs", configs}};
  return doc.dump(2) + "\n";
}

std::string format_table(const PlanResult& r, std::size_t top) {
  const MachineProfile& m = r.machine;
  const Workload& w = r.request.workload;
  const CostSettings& s = r.request.settings;
  const bool as_coded = s.variant == ModelVariant::kAsCoded;
  std::string out;
  if (m.implementation == Implementation::kAxonnCpp)
    appendf(&out,
            "machine  %s: %ld ranks per node (%s), sgemm %.1f GFLOP/s + %.2f us per call, memory-bound %.1f GB/s, "
            "%.1f GiB per rank\n",
            m.name.c_str(), m.gpus_per_node, m.gpu_name.empty() ? "CPU" : m.gpu_name.c_str(),
            m.gemm_flops_per_s() * 1e-9, m.gemm_call_us, m.hbm_gbs, m.memory_gib);
  else
    appendf(&out, "machine  %s: %ld x %s per node, %.1f TFLOP/s bf16 peak x %.2f GEMM efficiency, %.0f GiB\n",
            m.name.c_str(), m.gpus_per_node, m.gpu_name.empty() ? "GPU" : m.gpu_name.c_str(), m.peak_tflops,
            m.gemm_efficiency, m.memory_gib);
  if (m.bandwidth_table.empty() || with_orders(r)) {  // where the fallback (the two levels) decides
    const double alpha_in = m.spread_latency_s(true) * 1e6, alpha_out = m.spread_latency_s(false) * 1e6;
    appendf(&out, "network  %ld per node; %s: %.3g GB/s inside a node, %.3g GB/s per node between nodes, latency "
            "%.3g / %.3g us\n", m.gpus_per_node, m.bandwidth_table.empty() ? "two levels" : "table, else",
            m.intra_node_gbs, m.inter_node_gbs, alpha_in, alpha_out);
  }
  const bool billions = w.parameters() >= 1e9;
  const model::GptConfig& c = w.model.config;
  const std::string llama = c.family == model::Family::kLlama
                                ? detail::concat(" KV=", c.kv_heads(), " FFN=", c.mlp_hidden(), " (llama)")
                                : std::string();
  appendf(&out, "model    %s: L=%ld H=%ld heads=%ld%s V=%ld, %.2f %s parameters; S=%ld, batch %ld sequences\n",
          w.model.name.empty() ? "custom" : w.model.name.c_str(), w.model.layers(), w.model.hidden(), w.model.heads(),
          llama.c_str(), w.model.vocab(), w.parameters() / (billions ? 1e9 : 1e6), billions ? "B" : "M", w.seq_len,
          w.batch_size);
  appendf(&out,
          "search   %ld GPUs: %ld grids Gx*Gy*Gz*Gdata = %ld; %ld admissible, %ld of them fit in %.1f GiB (%.0f%% of "
          "%.0f GiB)\nadmits   a grid where the model's shapes and the batch divide, and Gx*Gy*Gz, the ranks that "
          "share one copy of the weights, is at least %ld (--min-tp)\n",
          r.request.gpus, r.factorizations, r.request.gpus, r.admissible, r.fitting, s.memory_headroom * m.memory_gib,
          100 * s.memory_headroom, m.memory_gib, r.request.min_tp);
  const bool cpp = !as_coded && s.implementation == Implementation::kAxonnCpp;
  if (cpp)
    appendf(&out, "cost     %s model of the axonn-cpp step (fp32, recompute %s, blocking collectives); ranked by %s\n\n",
            std::string(to_string(s.variant)).c_str(), s.recompute ? "on" : "off", "step time, grids that fit first");
  else
    appendf(&out, "cost     %s model, recompute %s, overlap %s; ranked by %s\n\n",
            std::string(to_string(s.variant)).c_str(), (as_coded || s.recompute) ? "on" : "off",
            s.overlap ? "on" : "off",
            as_coded ? "communication time alone, as AxoNN does" : "step time, grids that fit first");
  const bool orders = with_orders(r);
  if (r.request.search_orders)
    appendf(&out, "orders   every rank order of X, Y, Z that places a grid's groups differently: %zu configurations\n",
            r.configs.size());
  const bool memory = r.request.search_memory;  // each grid's micro-batch size and recompute were chosen
  appendf(&out, "%4s %5s %5s %6s %5s%s%s | %8s %9s %8s %9s | %7s %7s %7s %7s %7s | %8s %4s %6s\n", "rank", "Gx", "Gy",
          "Gz", "Gdata", orders ? "  order" : "", memory ? "   mbs  rc" : "", "step_s", "compute_s", "comm_s", "exposed_s", "X_s", "Y_s", "Z_s",
          "data_s", "emb_s", "mem_GiB", "fits", "MFU");
  for (std::size_t i = 0; i < shown(r, top); ++i) {
    const Estimate& e = r.configs[i];
    const std::string order = orders ? "  " + layout::grid_order_str(e.grid.order) : "";
    char choice[32] = "";
    if (memory)
      std::snprintf(choice, sizeof choice, " %5ld %3s", micro_batch_size(r.request.workload, e),
                    e.recompute ? "on" : "off");
    appendf(&out,
            "%4zu %5d %5d %6d %5d%s%s | %8.3f %9.3f %8.3f %9.3f | %7.3f %7.3f %7.3f %7.3f %7.3f | %8.2f %4s "
            "%5.1f%%\n",
            i + 1, e.grid.gx, e.grid.gy, e.grid.gz, e.grid.gdata, order.c_str(), choice, e.total_s, e.compute_s, e.comm_s,
            e.exposed_comm_s, e.comm.x, e.comm.y, e.comm.z, e.comm.data, e.comm.embedding, e.memory.total_gib(),
            e.fits ? "yes" : "NO", 100 * e.mfu);
  }
  if (shown(r, top) < r.configs.size())
    appendf(&out, "(%zu more; --top 0 shows all)\n", r.configs.size() - shown(r, top));
  return out;
}

std::string grid_degrees(long gx, long gy, long gz, long gdata) {
  std::string d;
  const auto add = [&d](const std::string& part) { d += (d.empty() ? "" : ", ") + part; };
  if (gx > 1 && gy > 1) add(detail::concat("2D TP ", gx, "x", gy));
  else if (gx * gy > 1) add(detail::concat("TP ", gx * gy, gx > 1 ? " (over X)" : ""));
  if (gz > 1) add(detail::concat("FSDP ", gz));
  if (gdata > 1) add(detail::concat("DP ", gdata));
  return d.empty() ? "one rank" : d;
}

namespace {

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}
std::string fmt_seconds(double s) { return fixed(s, 3) + " s"; }

// The step's largest term: compute, or the collectives of one group (before overlap hides part of them).
std::string largest_term(const Estimate& e) {
  struct Term {
    const char* name;
    double s;
  };
  const Term terms[] = {{"compute", e.compute_s},          {"X collectives", e.comm.x}, {"Y collectives", e.comm.y},
                        {"Z collectives (FSDP)", e.comm.z}, {"data all-reduce", e.comm.data},
                        {"embedding collectives", e.comm.embedding}};
  const Term* big = &terms[0];
  for (const Term& t : terms)
    if (t.s > big->s) big = &t;
  return detail::concat(big->name, " ", fmt_seconds(big->s));
}

// The train flags of a configuration's micro-batches and recompute ("" for one micro-batch without recompute).
std::string train_flags(const Workload& w, const Estimate& e) {
  const std::string size = e.micro_batches > 1 ? detail::concat("--micro-batch-size ", micro_batch_size(w, e)) : "";
  if (!e.recompute) return size;
  return size.empty() ? "--recompute" : size + " --recompute";
}

// What would make a configuration that does not fit fit, by its micro-batches and recompute (fastest_fit),
// beside the time of the plan's best (0: none fits).
std::string fit_advice(const PlanResult& r, const Estimate& e, double best_s) {
  const char* none = "no micro-batch size or recompute makes it fit: it needs more Z (FSDP) or more ranks";
  if (r.request.settings.variant != ModelVariant::kCorrected) return none;
  const std::optional<Estimate> fit = fastest_fit(r.machine, r.request.workload, e.grid, r.request.settings);
  if (!fit) return none;
  const std::string flags = train_flags(r.request.workload, *fit);
  return detail::concat("it fits with ", flags.empty() ? "one micro-batch without recompute" : flags, ": ",
                        fixed(fit->total_s, 3), " s/step, ", fixed(fit->memory.total_gib(), 2), " GiB",
                        best_s <= 0 || fit->total_s < best_s ? " (plan with --search-memory)" : ", slower than #1");
}

}  // namespace

std::string explain_plan(const PlanResult& r) {
  if (r.configs.empty()) return "";
  const double budget = r.request.settings.memory_headroom * r.machine.memory_gib;
  std::string out = "\nwhy (memory budget " + fixed(budget, 1) + " GiB per rank):\n";
  const std::size_t n = std::min<std::size_t>(3, r.configs.size());
  for (std::size_t i = 0; i < n; ++i) {
    const Estimate& e = r.configs[i];
    const GridShape& g = e.grid;
    const std::string room = e.fits ? fixed(budget - e.memory.total_gib(), 2) + " GiB to spare"
                                    : "does NOT fit: " + fixed(e.memory.total_gib() - budget, 2) + " GiB over; " +
                                          fit_advice(r, e, r.configs.front().fits ? r.configs.front().total_s : 0);
    appendf(&out, "  #%zu %s = %s: %.3f s/step, largest term %s; memory %.2f GiB, %s\n", i + 1, to_string(g).c_str(),
            grid_degrees(g.gx, g.gy, g.gz, g.gdata).c_str(), e.total_s, largest_term(e).c_str(), e.memory.total_gib(),
            room.c_str());
  }
  // faster grids that do not fit: what keeps the best from being faster, and what would make them fit
  const Estimate& best = r.configs.front();
  const Workload& w = r.request.workload;
  std::size_t faster = 0;
  for (const Estimate& e : r.configs)
    if (!e.fits && best.fits && e.total_s < best.total_s) {
      if (faster++ >= 2) continue;
      appendf(&out, "  faster but too big: %s = %s, %.3f s/step, needs %.2f GiB (%.2f over); %s\n",
              to_string(e.grid).c_str(), grid_degrees(e.grid.gx, e.grid.gy, e.grid.gz, e.grid.gdata).c_str(), e.total_s,
              e.memory.total_gib(), e.memory.total_gib() - budget, fit_advice(r, e, best.total_s).c_str());
    }
  if (faster > 2) appendf(&out, "  (%zu more faster grids do not fit)\n", faster - 2);
  if (best.fits) {
    const std::string flags = train_flags(w, best);
    appendf(&out, "run      mpirun -np %ld axonn train%s --batch-size %ld --seq-len %ld --grid %d,%d,%d,%d%s%s%s\n",
            r.request.gpus, w.model.name.empty() ? "" : (" --model " + w.model.name).c_str(), w.batch_size, w.seq_len,
            best.grid.gx, best.grid.gy, best.grid.gz, best.grid.gdata,
            best.grid.axonn_order() ? "" : (" --grid-order " + layout::grid_order_str(best.grid.order)).c_str(),
            flags.empty() ? "" : " ", flags.c_str());
  }
  return out;
}

}  // namespace axonn::planner
