#include "axonn/report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"
#include "axonn/core/progress.hpp"
#include "axonn/report/run_contents.hpp"

namespace axonn::report {
namespace {

std::string read_text(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  AXONN_CHECK_IO(f.good(), "cannot read ", what, " '", path, "'");
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

std::string fmt(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// 491520 -> "491,520": a count a person reads at a glance.
std::string grouped(double v) {
  if (!std::isfinite(v)) return "-";
  std::string digits = fmt("%.0f", std::fabs(v)), out;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

// A key of run.json, as text ("" when absent).
std::string run_info_value(const RunData& run, const std::string& key) {
  for (const auto& [k, v] : run.run_info)
    if (k == key) return v;
  return "";
}

double median(std::vector<double> v) {
  std::erase_if(v, [](double x) { return !std::isfinite(x); });
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The series of one metric over the records that have it, against x (step or tokens); `scale`
// converts units (MFU to %).
Series metric_series(const std::string& name, const std::vector<MetricsRecord>& records, const std::vector<double>& x,
                     std::optional<double> MetricsRecord::*member, double scale = 1) {
  Series s{name, {}, {}};
  for (size_t i = 0; i < records.size(); i++) {
    const std::optional<double>& v = records[i].*member;
    if (!v) continue;
    s.x.push_back(x[i]);
    s.y.push_back(*v * scale);
  }
  return s;
}

bool has_points(const Chart& c) {
  for (const Series& s : c.series)
    if (!s.y.empty()) return true;
  return false;
}

size_t non_finite(const Chart& c) {
  size_t n = 0;
  for (const Series& s : c.series)
    for (size_t i = 0; i < s.y.size(); i++)
      if (!std::isfinite(s.y[i]) || (i < s.x.size() && !std::isfinite(s.x[i]))) n++;
  return n;
}

// The step axis: 1-based, as the training's progress lines count.
std::vector<double> step_axis(const std::vector<MetricsRecord>& records) {
  std::vector<double> x;
  for (const MetricsRecord& r : records) x.push_back(static_cast<double>(r.step + 1));
  return x;
}

Chart line_chart(std::string title, std::string x_label, std::string y_label, std::vector<Series> series) {
  Chart c;
  c.title = std::move(title);
  c.x_label = std::move(x_label);
  c.y_label = std::move(y_label);
  c.series = std::move(series);
  std::erase_if(c.series, [](const Series& s) { return s.y.empty(); });
  return c;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

ReportSources find_sources(const std::string& run_dir, const ReportSources& given) {
  ReportSources s;
  if (!run_dir.empty()) {
    const RunDirContents c = scan_run_dir(train::RunDir(run_dir));
    s.run_dir = run_dir;
    s.config = c.config.value_or("");
    s.run_info = c.run_info.value_or("");
    s.metrics = c.metrics.value_or("");
    s.plan = c.plan_validate.value_or("");
    s.checkpoints = c.checkpoints.value_or("");
    s.samples = c.samples.value_or("");
    s.traces = c.traces;
  } else {
    AXONN_CHECK_ARG(!given.metrics.empty() || !given.traces.empty() || !given.plan.empty(),
                    "nothing to report: give a run directory, or the files (--metrics FILE, --trace FILE, --plan FILE)");
  }
  if (!given.config.empty()) s.config = given.config;
  if (!given.run_info.empty()) s.run_info = given.run_info;
  if (!given.metrics.empty()) s.metrics = given.metrics;
  if (!given.plan.empty()) s.plan = given.plan;
  if (!given.traces.empty()) s.traces = given.traces;
  return s;
}

PlanData read_plan_validate(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(read_text(path, "planner validation file"), nullptr, false);
  const std::string what = "planner validation file '" + path + "'";
  AXONN_CHECK_ARG(!j.is_discarded(), what, " is not valid JSON (write it with bench_plan_validate --json FILE)");
  AXONN_CHECK_ARG(j.is_object() && j.contains("grids") && j["grids"].is_array(), what,
                  " has no \"grids\" array; is it the output of bench_plan_validate --json?");
  PlanData p;
  p.path = path;
  p.spearman = j.value("spearman", std::nan(""));
  p.mean_relative_error = j.value("mean_relative_error", std::nan(""));
  p.measured_best_predicted_place = j.value("measured_best_predicted_place", std::nan(""));
  for (const nlohmann::json& g : j["grids"]) {
    AXONN_CHECK_ARG(g.is_object() && g.contains("grid") && g["grid"].is_string() && g.contains("measured_s") &&
                        g["measured_s"].is_number() && g.contains("predicted_s") && g["predicted_s"].is_number(),
                    what, ": an entry of \"grids\" lacks \"grid\", \"measured_s\" or \"predicted_s\": ",
                    g.dump().substr(0, 120));
    p.grids.push_back({g["grid"].get<std::string>(), g["measured_s"].get<double>(), g["predicted_s"].get<double>()});
  }
  AXONN_CHECK_ARG(!p.grids.empty(), what, " lists no grids");
  return p;
}

RunData load_run(const ReportSources& s, Progress* progress) {
  RunData run;
  run.sources = s;
  auto tick = [&] {
    if (progress) progress->add(1);
  };
  if (!s.metrics.empty()) {
    run.metrics = read_metrics_file(s.metrics);
    tick();
  }
  if (!s.config.empty()) {
    run.config_text = read_text(s.config, "config file");
    tick();
  }
  if (!s.samples.empty()) {
    run.samples_text = read_text(s.samples, "samples file");
    // the page shows the newest samples, cut at a line, if the file grew long
    constexpr size_t kMaxSamples = 64 * 1024;
    if (run.samples_text.size() > kMaxSamples) {
      const size_t from = run.samples_text.find('\n', run.samples_text.size() - kMaxSamples);
      run.samples_text = "(earlier samples left out)\n" +
                         run.samples_text.substr(from == std::string::npos ? run.samples_text.size() - kMaxSamples : from + 1);
    }
    tick();
  }
  if (!s.run_info.empty()) {
    // in the file's order (run.json is written in the order a reader wants)
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_text(s.run_info, "run file"), nullptr, false);
    AXONN_CHECK_ARG(!j.is_discarded() && j.is_object(), "run file '", s.run_info, "' is not a JSON object");
    for (const auto& [key, value] : j.items()) {
      if (key == "memory_per_rank") {  // [{"params": bytes, ...}, ...]
        AXONN_CHECK_ARG(value.is_array(), "run file '", s.run_info, "': memory_per_rank is not an array");
        for (const nlohmann::ordered_json& rank : value) {
          AXONN_CHECK_ARG(rank.is_object(), "run file '", s.run_info, "': memory_per_rank holds a non-object");
          std::vector<std::pair<std::string, double>> parts;
          for (const auto& [part, bytes] : rank.items()) {
            AXONN_CHECK_ARG(bytes.is_number(), "run file '", s.run_info, "': memory_per_rank's ", part,
                            " is not a number");
            parts.push_back({part, bytes.get<double>()});
          }
          run.memory_per_rank.push_back(std::move(parts));
        }
        continue;
      }
      std::string text = value.is_string() ? value.get<std::string>() : value.dump();
      if (text.size() > 300) text = text.substr(0, 300) + "...";
      run.run_info.push_back({key, text});
    }
    tick();
  }
  for (const std::string& path : s.traces) {
    const std::string text = read_text(path, "trace file");
    TraceData t;
    t.path = path;
    try {
      t.ranks = train::summarize_trace(text);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("trace file '" + path + "': " + e.what());
    }
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("otherData") && j["otherData"].is_object()) {
      const nlohmann::json& o = j["otherData"];
      t.grid = o.value("grid", "");
      if (o.contains("steps") && o["steps"].is_array() && o["steps"].size() == 2)
        t.steps = o["steps"][0].dump() + "-" + o["steps"][1].dump();
    }
    run.traces.push_back(std::move(t));
    tick();
  }
  if (!s.plan.empty()) {
    run.plan = read_plan_validate(s.plan);
    tick();
  }
  return run;
}

Chart loss_chart(const RunData& run) {
  AXONN_CHECK_ARG(!run.metrics.empty(), "no metrics: the loss chart needs a metrics file");
  const std::vector<double> steps = step_axis(run.metrics);
  return line_chart("loss", "step", "loss",
                    {metric_series("train", run.metrics, steps, &MetricsRecord::loss),
                     metric_series("validation", run.metrics, steps, &MetricsRecord::val_loss)});
}

std::vector<NamedChart> report_charts(const RunData& run) {
  std::vector<NamedChart> out;
  auto add = [&](std::string id, std::string section, Chart c, std::string caption) {
    if (has_points(c)) out.push_back({std::move(id), std::move(section), std::move(c), std::move(caption)});
  };
  const auto& m = run.metrics;
  if (!m.empty()) {
    const std::vector<double> steps = step_axis(m), tokens = cumulative_tokens(m);
    add("chart-loss-step", "loss", loss_chart(run),
        "Mean cross-entropy of each step's batch, before its update (validation: on held-out data).");
    add("chart-loss-tokens", "loss",
        line_chart("loss against tokens", "tokens trained", "loss",
                   {metric_series("train", m, tokens, &MetricsRecord::loss),
                    metric_series("validation", m, tokens, &MetricsRecord::val_loss)}),
        "The same losses against the tokens trained so far (from the metrics' tokens, or tokens/s × step time).");
    // one metric against step per chart
    struct StepChart {
      const char *id, *section, *title, *y_label, *series;
      std::optional<double> MetricsRecord::*member;
      double scale;
      const char* caption;
    };
    const StepChart step_charts[] = {
        {"chart-lr", "optimizer", "learning rate", "learning rate", "lr", &MetricsRecord::lr, 1,
         "The learning rate of each step (warm-up and schedule)."},
        {"chart-grad-norm", "optimizer", "gradient norm", "L2 norm", "grad norm", &MetricsRecord::grad_norm, 1,
         "Global L2 norm of the gradient before clipping; spikes often precede loss spikes."},
        {"chart-step-ms", "throughput", "step time", "ms", "step time", &MetricsRecord::step_ms, 1,
         "Wall time of each training step (the first includes warm-up)."},
        {"chart-tokens-per-s", "throughput", "throughput", "tokens/s", "tokens/s", &MetricsRecord::tokens_per_s, 1,
         "Tokens of the global batch per second of step time."},
        {"chart-mfu", "throughput", "MFU", "% of peak", "MFU", &MetricsRecord::mfu, 100,
         "Model FLOPs per second over the peak chosen at the start of the run and never changed (given, calibrated "
         "or measured; the log names it), all ranks. Above 100 %: the peak is wrong."},
    };
    for (const StepChart& c : step_charts)
      add(c.id, c.section, line_chart(c.title, "step", c.y_label, {metric_series(c.series, m, steps, c.member, c.scale)}),
          c.caption);
    // the Goldfish loss: the loss the model trains on (the kept targets') beside every target's and the
    // dropped ones' (what a memorising model would drive down too), and the dropped share
    const bool goldfish =
        std::any_of(m.begin(), m.end(), [](const MetricsRecord& r) { return r.loss_all_tokens.has_value(); });
    if (goldfish)
      add("chart-goldfish-loss", "goldfish",
          line_chart("loss by targets", "step", "loss",
                     {metric_series("kept (trained)", m, steps, &MetricsRecord::loss),
                      metric_series("all", m, steps, &MetricsRecord::loss_all_tokens),
                      metric_series("dropped", m, steps, &MetricsRecord::loss_dropped_tokens)}),
          "Under the Goldfish loss: the cross-entropy of the kept targets (the loss trained on), of every target, "
          "and of the dropped targets, which the model never trains on (docs/goldfish.md).");
    add("chart-goldfish-dropped", "goldfish",
        line_chart("dropped targets", "step", "% of targets",
                   {metric_series("dropped", m, steps, &MetricsRecord::dropped_fraction, 100)}),
        "The share of each step's targets the Goldfish mask dropped from the loss (about 1/k).");
    size_t ranks = 0;
    for (const MetricsRecord& r : m) ranks = std::max(ranks, r.memory_bytes.size());
    // what each rank allocates, by part (run.json, written at the start: the arenas do not grow)
    if (!run.memory_per_rank.empty()) {
      Chart c;
      c.kind = ChartKind::kBar;
      c.title = "memory per rank, by part";
      c.x_label = "rank";
      c.y_label = "MiB";
      std::vector<Series> parts;
      for (size_t k = 0; k < run.memory_per_rank.size(); k++) {
        c.categories.push_back("rank " + std::to_string(k));
        for (const auto& entry : run.memory_per_rank[k]) {  // (not a structured binding: clang's OpenMP cannot
                                                             // capture one in the lambda)
          const std::string& part = entry.first;
          auto it = std::find_if(parts.begin(), parts.end(), [&](const Series& x) { return x.name == part; });
          if (it == parts.end()) it = parts.insert(parts.end(), Series{part, {}, {}});
          it->y.resize(k, 0.0);
          it->y.push_back(entry.second / (1024.0 * 1024.0));
        }
      }
      for (Series& p : parts) p.y.resize(run.memory_per_rank.size(), 0.0);
      c.series = std::move(parts);
      add("chart-memory-parts", "memory", std::move(c),
          "What each rank allocates at the start of the run, by part: its shards of the parameters and gradients, "
          "AdamW's two moments, the activations and scratch of its micro-batch, the communication buffers.");
    }
    if (ranks > 0) {
      std::vector<Series> per_rank(ranks);
      for (size_t k = 0; k < ranks; k++) per_rank[k].name = "rank " + std::to_string(k);
      for (size_t i = 0; i < m.size(); i++)
        for (size_t k = 0; k < m[i].memory_bytes.size(); k++) {
          per_rank[k].x.push_back(steps[i]);
          per_rank[k].y.push_back(m[i].memory_bytes[k] / (1024.0 * 1024.0));
        }
      add("chart-memory", "memory", line_chart("memory per rank", "step", "MiB", std::move(per_rank)),
          "Memory each rank holds (parameters, gradients, optimizer state, activations, buffers).");
    }
  }
  for (size_t t = 0; t < run.traces.size(); t++) {
    const TraceData& tr = run.traces[t];
    // one rank (or a grid whose groups all have one rank) communicates nothing: nothing to hide
    if (std::none_of(tr.ranks.begin(), tr.ranks.end(), [](const train::TraceRankSummary& r) { return r.comm_ms > 0; }))
      continue;
    Chart c;
    c.kind = ChartKind::kBar;
    c.title = "communication hidden under compute: " + base_name(tr.path);
    c.y_label = "% of communication";
    c.y_min = 0;
    c.y_max = 100;
    Series s{"hidden", {}, {}};
    for (const train::TraceRankSummary& r : tr.ranks) {
      c.categories.push_back("rank " + std::to_string(r.pid));
      s.y.push_back(100.0 * r.hidden_fraction);
    }
    c.series.push_back(std::move(s));
    add("chart-overlap-" + std::to_string(t), "overlap", std::move(c),
        "Per rank, the share of the time with a collective in flight during which the rank also computed" +
            std::string(tr.grid.empty() ? "" : " (grid " + tr.grid + (tr.steps.empty() ? "" : ", steps " + tr.steps) +
                                                    ")") +
            ". The rest is exposed: the rank waited for it.");
  }
  if (run.plan) {
    Chart c;
    c.kind = ChartKind::kBar;
    c.title = "planner: predicted and measured step time";
    c.x_label = "grid (Gx x Gy x Gz x Gdata)";
    c.y_label = "ms";
    Series pred{"predicted", {}, {}}, meas{"measured", {}, {}};
    for (const PlanGrid& g : run.plan->grids) {
      c.categories.push_back(g.grid);
      pred.y.push_back(1e3 * g.predicted_s);
      meas.y.push_back(1e3 * g.measured_s);
    }
    c.series = {std::move(pred), std::move(meas)};
    add("chart-plan", "planner", std::move(c),
        "Each admissible grid's training-step time, as the planner predicts it and as measured (median of rounds).");
  }
  return out;
}

namespace {

struct SectionInfo {
  const char* id;
  const char* title;
  const char* missing;  // what the page says when the section has no chart; null: the section is left out
};
constexpr SectionInfo kSections[] = {
    {"loss", "Loss", "No loss: the run has no metrics file (axonn train --metrics FILE)."},
    {"optimizer", "Optimizer", "No learning rate or gradient norm in the metrics."},
    {"throughput", "Throughput", "No step time, tokens/s or MFU in the metrics."},
    {"goldfish", "Goldfish loss", nullptr},
    {"memory", "Memory per rank",
     "No per-rank memory: run.json's memory_per_rank (axonn train writes it) or the metrics' memory_bytes."},
    {"overlap", "Communication hidden under compute",
     "No trace: run axonn train --trace RUN_DIR/trace.json (docs/overlap.md)."},
    {"planner", "Planner: predicted against measured", nullptr},
};

void table_row(std::string* h, std::initializer_list<std::string> cells, bool header = false) {
  *h += "<tr>";
  bool first = true;
  for (const std::string& c : cells) {
    *h += header ? "<th>" : first ? "<td>" : "<td class=\"num\">";
    *h += escape_xml(c);
    *h += header ? "</th>" : "</td>";
    first = false;
  }
  *h += "</tr>\n";
}

std::string summary_table(const RunData& run) {
  const auto& m = run.metrics;
  std::string h = "<table>\n";
  if (m.empty()) return h + "<tr><td>no metrics</td></tr>\n</table>\n";
  std::vector<double> ms, tps, mfu;
  std::optional<size_t> best, last_loss, last_val;
  for (size_t i = 0; i < m.size(); i++) {
    if (m[i].step_ms) ms.push_back(*m[i].step_ms);
    if (m[i].tokens_per_s) tps.push_back(*m[i].tokens_per_s);
    if (m[i].mfu) mfu.push_back(100.0 * *m[i].mfu);
    if (m[i].loss && std::isfinite(*m[i].loss)) {
      last_loss = i;
      if (!best || *m[i].loss < *m[*best].loss) best = i;
    }
    if (m[i].val_loss && std::isfinite(*m[i].val_loss)) last_val = i;
  }
  double total_s = 0;
  for (double v : ms)
    if (std::isfinite(v)) total_s += v / 1e3;
  const std::vector<double> tokens = cumulative_tokens(m);
  auto row = [&](const std::string& k, const std::string& v) { table_row(&h, {k, v}); };
  // what ran, from run.json (a run directory's): the model, its grid and precision, its data
  const std::string model = run_info_value(run, "model"), params = run_info_value(run, "parameters");
  if (!model.empty())
    row("model", model + (params.empty() ? "" : ", " + fmt("%.2f", std::atof(params.c_str()) / 1e6) + "M parameters"));
  const std::string grid = run_info_value(run, "grid"), ranks = run_info_value(run, "world_size"),
                    degrees = run_info_value(run, "grid_degrees");
  if (!grid.empty())
    row("grid", grid + " (Gx,Gy,Gz,Gdata)" + (ranks.empty() ? "" : " on " + ranks + (ranks == "1" ? " rank" : " ranks")) +
                    (degrees.empty() ? "" : ": " + degrees));
  for (const char* key : {"precision", "batch", "data", "tokenizer", "started", "host"}) {
    const std::string v = run_info_value(run, key);
    if (!v.empty()) row(key, v);
  }
  row("steps recorded", std::to_string(m.size()) + " (step " + std::to_string(m.front().step + 1) + " to " +
                            std::to_string(m.back().step + 1) + ")");
  if (last_loss)
    row("last loss", fmt("%.4f", *m[*last_loss].loss) + " (step " + std::to_string(m[*last_loss].step + 1) + ")");
  if (best) row("lowest loss", fmt("%.4f", *m[*best].loss) + " (step " + std::to_string(m[*best].step + 1) + ")");
  if (last_val)
    row("last validation loss",
        fmt("%.4f", *m[*last_val].val_loss) + " (step " + std::to_string(m[*last_val].step + 1) + ")");
  if (std::isfinite(tokens.back())) row("tokens trained", grouped(tokens.back()));
  if (!ms.empty()) row("time in steps", fmt("%.1f s", total_s));
  if (!ms.empty()) row("median step time", fmt("%.1f ms", median(ms)));
  if (!tps.empty()) row("median tokens/s", grouped(median(tps)));
  if (!mfu.empty()) row("median MFU", fmt("%.2f %%", median(mfu)));
  if (const std::string peak = run_info_value(run, "mfu_peak"); !mfu.empty() && !peak.empty()) row("MFU peak", peak);
  return h + "</table>\n";
}

std::string files_table(const RunData& run) {
  const ReportSources& s = run.sources;
  struct Part {
    const char* name;
    std::string path;
    const char* how;
  };
  const std::string traces = s.traces.empty() ? "" : [&] {
    std::string t;
    for (const std::string& p : s.traces) t += (t.empty() ? "" : ", ") + p;
    return t;
  }();
  const Part parts[] = {
      {train::kConfigFile, s.config, "the effective configuration (written by axonn train with a run directory)"},
      {train::kRunInfoFile, s.run_info, "git commit, machine, world size, grid, library versions"},
      {train::kMetricsFile, s.metrics, "axonn train --metrics FILE"},
      {"trace*.json", traces, "axonn train --trace FILE"},
      {"checkpoints/", s.checkpoints, "axonn train --checkpoint-dir DIR"},
      {train::kPlanValidateFile, s.plan, "optional: bench_plan_validate --json FILE"},
      {train::kSamplesFile, s.samples, "optional: axonn generate --run-dir DIR (the trained model's samples)"},
  };
  std::string h = "<table>\n";
  table_row(&h, {"part", "file", "made by"}, true);
  for (const Part& p : parts) {
    h += "<tr><td>" + escape_xml(p.name) + "</td>";
    if (p.path.empty())
      h += "<td class=\"missing\">missing</td>";
    else
      h += "<td>" + escape_xml(p.path) + "</td>";
    h += "<td>" + escape_xml(p.how) + "</td></tr>\n";
  }
  return h + "</table>\n";
}

std::string overlap_tables(const RunData& run) {
  std::string h;
  for (const TraceData& t : run.traces) {
    h += "<h3>" + escape_xml(t.path) + (t.grid.empty() ? "" : " — grid " + escape_xml(t.grid)) +
         (t.steps.empty() ? "" : ", steps " + escape_xml(t.steps)) + "</h3>\n<table>\n";
    table_row(&h, {"rank", "wall ms", "compute ms", "comm ms", "hidden ms", "exposed ms", "hidden"}, true);
    for (const train::TraceRankSummary& r : t.ranks)
      table_row(&h, {std::to_string(r.pid), fmt("%.2f", r.wall_ms), fmt("%.2f", r.compute_ms), fmt("%.2f", r.comm_ms),
                     fmt("%.2f", r.hidden_ms), fmt("%.2f", r.exposed_ms), fmt("%.1f %%", 100.0 * r.hidden_fraction)});
    h += "</table>\n";
  }
  return h;
}

std::string plan_table(const PlanData& p) {
  std::string h = "<p>" + escape_xml(p.path) + ": Spearman rank correlation " + fmt("%.3f", p.spearman) +
                  ", mean relative error " + fmt("%.1f %%", 100.0 * p.mean_relative_error) +
                  ", the measured best grid is " + fmt("%.0f", p.measured_best_predicted_place) +
                  " in the predicted ranking.</p>\n<table>\n";
  table_row(&h, {"grid", "measured ms", "predicted ms", "error"}, true);
  for (const PlanGrid& g : p.grids)
    table_row(&h, {g.grid, fmt("%.2f", 1e3 * g.measured_s), fmt("%.2f", 1e3 * g.predicted_s),
                   fmt("%+.1f %%", 100.0 * (g.predicted_s - g.measured_s) / g.measured_s)});
  return h + "</table>\n";
}

constexpr const char* kStyle = R"(
body { font-family: sans-serif; color: #222; background: #fff; max-width: 1320px; margin: 0 auto; padding: 16px 24px; }
h1 { font-size: 24px; margin: 8px 0 2px; }
h2 { font-size: 19px; margin: 28px 0 8px; border-bottom: 1px solid #e3e6eb; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.sub { color: #666; margin: 0 0 12px; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid #e3e6eb; border-radius: 6px; padding: 8px; background: #fff; }
svg.chart { width: 100%; height: auto; display: block; }
figcaption { font-size: 13px; color: #555; margin-top: 4px; }
table { border-collapse: collapse; font-size: 14px; margin: 4px 0 8px; }
th, td { padding: 3px 12px 3px 0; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.missing { color: #a15c00; }
.note { color: #a15c00; font-size: 14px; }
pre { background: #f6f8fa; padding: 12px; overflow: auto; font-size: 13px; }
pre.wrap { white-space: pre-wrap; overflow-wrap: anywhere; }
footer { color: #888; font-size: 12px; margin: 32px 0 8px; }
)";

}  // namespace

std::string report_html(const RunData& run) {
  const std::string name = !run.sources.run_dir.empty() ? run.sources.run_dir
                           : !run.sources.metrics.empty() ? run.sources.metrics
                           : !run.sources.traces.empty()  ? run.sources.traces.front()
                                                          : run.sources.plan;
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // nothing may be fetched: no script, font, image, stylesheet or frame; only the inline style
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
       "img-src data:\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>axonn report: " + escape_xml(name) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<h1>axonn run report</h1>\n<p class=\"sub\">" + escape_xml(name) + "</p>\n";

  h += "<section id=\"summary\">\n<h2>Summary</h2>\n" + summary_table(run) + "</section>\n";
  h += "<section id=\"files\">\n<h2>Run directory</h2>\n" + files_table(run);
  if (!run.run_info.empty()) {
    h += "<h3>run.json</h3>\n<table>\n";
    for (const auto& [k, v] : run.run_info) table_row(&h, {k, v});
    h += "</table>\n";
  }
  h += "</section>\n";

  const std::vector<NamedChart> charts = report_charts(run);
  for (const SectionInfo& sec : kSections) {
    std::string figures;
    for (const NamedChart& c : charts) {
      if (c.section != sec.id) continue;
      std::string caption = c.caption;
      if (const size_t bad = non_finite(c.chart))
        caption = ::axonn::detail::concat(caption, " ", bad, " non-finite value", bad > 1 ? "s" : "",
                                          " (NaN or infinity) not drawn.");
      figures += "<figure>\n" + to_svg(layout_chart(c.chart), c.id) + "\n<figcaption>" + escape_xml(caption) +
                 "</figcaption>\n</figure>\n";
    }
    // a section with nothing to show is left out, or says in one line how to get it
    if (figures.empty() && sec.missing == nullptr) continue;
    if (figures.empty() && std::string(sec.id) == "overlap" && !run.traces.empty()) continue;  // no communication
    h += std::string("<section id=\"") + sec.id + "\">\n<h2>" + sec.title + "</h2>\n";
    if (figures.empty())
      h += std::string("<p class=\"note\">") + escape_xml(sec.missing) + "</p>\n";
    else
      h += "<div class=\"charts\">\n" + figures + "</div>\n";
    if (std::string(sec.id) == "overlap") h += overlap_tables(run);
    if (std::string(sec.id) == "planner" && run.plan) h += plan_table(*run.plan);
    h += "</section>\n";
  }

  if (!run.samples_text.empty())  // only when a generation wrote some: no empty section
    h += "<section id=\"samples\">\n<h2>Samples</h2>\n<pre class=\"wrap\">" + escape_xml(run.samples_text) + "</pre>\n</section>\n";
  h += "<section id=\"config\">\n<h2>Configuration</h2>\n";
  if (run.config_text.empty())
    h += "<p class=\"note\">No config.toml.</p>\n";
  else
    h += "<pre>" + escape_xml(run.config_text) + "</pre>\n";
  h += "</section>\n<footer>Written by axonn report. The page is self-contained: it loads nothing.</footer>\n";
  return h + "</body>\n</html>\n";
}

}  // namespace axonn::report
