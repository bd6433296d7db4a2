// bench_memorization_plot RESULTS.json OUT_PREFIX — the memorisation study's charts (bench/memorization/run.sh):
// OUT_PREFIX-rouge.png (Rouge-L of the greedy 50-token continuations) and OUT_PREFIX-exact.png (exact-match
// rate), canaries and controls under the standard and the Goldfish loss, one group of bars per model size.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "axonn/report/chart.hpp"
#include "axonn/report/raster.hpp"

using nlohmann::json;
namespace report = axonn::report;

namespace {

report::Chart bars(const json& runs, const std::vector<std::string>& sizes, const std::string& metric,
                   const std::string& title) {
  report::Chart c;
  c.kind = report::ChartKind::kBar;
  c.title = title;
  c.x_label = "model size (parameters)";
  c.y_label = metric;
  c.y_min = 0;
  c.y_max = 1;
  c.width = 760;
  c.categories = sizes;
  for (const char* set : {"canary", "control"}) {
    for (const char* loss : {"standard", "goldfish"}) {
      report::Series s;
      s.name = std::string(set) + ", " + loss;
      for (const auto& size : sizes) {
        double v = 0;
        for (const auto& r : runs)
          if (r.at("size_label") == size && r.at("loss") == loss) v = r.at(set).at(metric).get<double>();
        s.y.push_back(v);
      }
      c.series.push_back(std::move(s));
    }
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s RESULTS.json OUT_PREFIX\n", argv[0]);
    return 2;
  }
  try {
    std::ifstream in(argv[1]);
    if (!in) throw std::runtime_error(std::string("cannot read ") + argv[1]);
    const json results = json::parse(in);
    const json& runs = results.at("runs");
    std::vector<std::string> sizes;
    for (const auto& r : runs) {
      const std::string s = r.at("size_label");
      if (std::find(sizes.begin(), sizes.end(), s) == sizes.end()) sizes.push_back(s);
    }
    const std::string prefix = argv[2];
    report::write_png(prefix + "-rouge.png",
                      report::rasterize(report::layout_chart(bars(runs, sizes, "rouge_l_tokens",
                                                                  "Rouge-L of 50 greedy tokens vs the suffix")), 2));
    report::write_png(prefix + "-exact.png",
                      report::rasterize(report::layout_chart(bars(runs, sizes, "exact_match_rate",
                                                                  "exact match of 50 greedy tokens")), 2));
    std::printf("wrote %s-rouge.png and %s-exact.png\n", prefix.c_str(), prefix.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_memorization_plot: %s\n", e.what());
    return 1;
  }
  return 0;
}
