// axonn report — one self-contained HTML page (and the loss curve as a PNG) about a run: from a run
// directory (report/run_contents.hpp), or from the files given (--metrics, --trace, --plan). docs/report.md.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/output_file.hpp"
#include "axonn/core/progress.hpp"
#include "axonn/report/raster.hpp"
#include "axonn/report/report.hpp"
#include "axonn/report/run_contents.hpp"
#include "commands.hpp"

namespace axonn::tools {

void add_report_command(CLI::App& app, Action* action) {
  struct Options {
    std::string run_dir, out, png, metrics, plan;
    std::vector<std::string> traces;
    bool quiet = false;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand(
      "report",
      "write a self-contained HTML page about a run (loss, learning rate, gradient norm, throughput, MFU, memory, "
      "communication hidden under compute, planner validation): inline SVG, nothing loaded from anywhere");
  sub->footer("Example:\n  axonn report runs/tiny    # writes runs/tiny/report.html and runs/tiny/loss.png");
  sub->add_option("RUN_DIR", o->run_dir,
                  "run directory (config.toml, run.json, metrics.jsonl, trace*.json, checkpoints/, "
                  "plan_validate.json); optional when files are given");
  sub->add_option("--out", o->out, "the HTML page (default: RUN_DIR/report.html; required without RUN_DIR)");
  sub->add_option("--png", o->png,
                  "the loss curve as a PNG (default: RUN_DIR/loss.png when the run has metrics)");
  sub->add_option("--metrics", o->metrics, "metrics JSON Lines (axonn train --metrics); overrides RUN_DIR's");
  sub->add_option("--trace", o->traces, "Chrome trace (axonn train --trace); repeatable; overrides RUN_DIR's")
      ->allow_extra_args(false);  // one file per --trace, so that RUN_DIR after it stays RUN_DIR
  sub->add_option("--plan", o->plan, "planner validation JSON (bench_plan_validate --json); overrides RUN_DIR's");
  sub->add_flag("--quiet", o->quiet, "no progress output");
  sub->callback([o, action] {
    *action = [o] {
      AXONN_CHECK_ARG(!o->out.empty() || !o->run_dir.empty(),
                      "--out FILE.html is needed without a run directory (where should the page go?)");
      report::ReportSources given;
      given.metrics = o->metrics;
      given.traces = o->traces;
      given.plan = o->plan;
      // every rank reads and checks the inputs (bad input fails alike everywhere); rank 0 writes
      const report::ReportSources sources = report::find_sources(o->run_dir, given);
      const std::string out = !o->out.empty() ? o->out : train::RunDir(o->run_dir).report();
      AXONN_CHECK_ARG(o->png.empty() || !sources.metrics.empty(),
                      "--png draws the loss curve, but there are no metrics: give --metrics FILE (or a run directory "
                      "with ", train::kMetricsFile, ")");
      const std::string png = !o->png.empty()                                  ? o->png
                              : !o->run_dir.empty() && !sources.metrics.empty() ? train::RunDir(o->run_dir).loss_png()
                                                                                : "";
      // the page and the curve never replace what the report reads (a run's metrics.jsonl, its traces, ...)
      std::vector<NamedPath> inputs;
      for (const auto& [what, path] :
           {std::pair{"the metrics", sources.metrics}, {"the run's configuration", sources.config},
            {"the run's record", sources.run_info}, {"the planner's validation", sources.plan},
            {"the run's samples", sources.samples}, {"the run's checkpoints", sources.checkpoints}})
        if (!path.empty()) inputs.push_back({what, path});
      for (const std::string& t : sources.traces) inputs.push_back({"the trace", t});
      check_output_file({"--out", out});
      check_output_apart({"--out", out}, inputs);
      if (!png.empty()) {
        check_output_file({"--png", png});
        check_output_apart({"--png", png}, inputs);
        AXONN_CHECK_ARG(!same_path(png, out), "--png '", png, "' and --out '", out,
                        "' are the same file: give each its own path");
      }
      const int files = static_cast<int>(!sources.metrics.empty()) + static_cast<int>(!sources.config.empty()) +
                        static_cast<int>(!sources.run_info.empty()) + static_cast<int>(sources.traces.size()) +
                        static_cast<int>(!sources.plan.empty()) + static_cast<int>(!sources.samples.empty());
      ProgressOptions po;
      po.unit = "files";
      if (o->quiet) po.mode = ProgressMode::kQuiet;
      Progress progress("report", files + 1 + static_cast<int>(!png.empty()), po);
      const report::RunData run = report::load_run(sources, &progress);
      const std::string html = report::report_html(run);
      const std::string png_bytes =
          png.empty() ? "" : report::encode_png(report::rasterize(report::layout_chart(report::loss_chart(run)), 2));
      if (comm::world()->rank() == 0) {
        // both temporaries first: an unwritable destination leaves neither file written
        checkpoint::AtomicFile html_file(out);
        std::optional<checkpoint::AtomicFile> png_file;
        if (!png.empty()) png_file.emplace(png);
        html_file.write(html.data(), html.size());
        if (png_file) png_file->write(png_bytes.data(), png_bytes.size());
        html_file.commit();
        if (png_file) png_file->commit();
      }
      progress.add(1 + static_cast<int>(!png.empty()));
      progress.finish();
      log_info("report    %s", out.c_str());
      if (!png.empty()) log_info("loss PNG  %s", png.c_str());
      return 0;
    };
  });
}

}  // namespace axonn::tools
