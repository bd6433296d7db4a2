// From `axonn calibrate`'s measurements to a profile: least-squares fits and the JSON writer.
#include "axonn/planner/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"

namespace axonn::planner {

namespace {

struct Line {
  double a = 0, b = 0;  // t = a + b·x
};

// Weighted least squares of t = a + b·x, weights 1/t² (relative errors), with a >= 0 and b > 0.
Line fit_line(const std::vector<double>& x, const std::vector<double>& t) {
  double sw = 0, swx = 0, swxx = 0, swt = 0, swxt = 0, max_x = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    sw += w;
    swx += w * x[i];
    swxx += w * x[i] * x[i];
    swt += w * t[i];
    swxt += w * x[i] * t[i];
    max_x = std::max(max_x, x[i]);
  }
  Line l;
  const double det = sw * swxx - swx * swx;
  if (x.size() >= 2 && det > 1e-12 * sw * swxx) {
    l.a = (swxx * swt - swx * swxt) / det;
    l.b = (sw * swxt - swx * swt) / det;
  } else {
    l.b = -1;  // one size only: decided below
  }
  if (l.a < 0) {  // no measurable fixed cost: through the origin
    l.a = 0;
    l.b = swxt / swxx;
  }
  if (!(l.b > 0)) {
    // Time does not grow with size over the range measured: all fixed cost, and a rate so high
    // that the largest size adds a thousandth of it.
    l.a = swt / sw;
    l.b = 1e-3 * l.a / max_x;
  }
  return l;
}

double max_rel_error(const Line& l, const std::vector<double>& x, const std::vector<double>& t) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e = std::max(e, std::fabs(l.a + l.b * x[i] - t[i]) / t[i]);
  return e;
}

double coef(CollectiveKind k) { return k == CollectiveKind::kAllReduce ? 2.0 : 1.0; }

double rounded(double v, int digits = 4) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

}  // namespace

CollectiveFit fit_collective(CollectiveKind kind, long ip, long size, std::vector<CollectiveSample> samples) {
  AXONN_CHECK_ARG(ip >= 1 && size >= 2, "a collective position needs ip >= 1 and size >= 2, got ip=", ip,
                  " size=", size);
  AXONN_CHECK_ARG(!samples.empty(), "no samples for ", to_string(kind), " at ip=", ip, " size=", size);
  std::vector<double> x, t;
  for (const auto& s : samples) {
    AXONN_CHECK_ARG(s.bytes > 0 && s.seconds > 0, "a ", to_string(kind), " sample needs bytes > 0 and seconds > 0");
    x.push_back(s.bytes);
    t.push_back(s.seconds);
  }
  const Line l = fit_line(x, t);
  CollectiveFit f;
  f.kind = kind;
  f.ip = ip;
  f.size = size;
  const double p = static_cast<double>(size), c = coef(kind);
  f.gbs = c * (p - 1) / p / l.b * 1e-9;
  f.latency_us = l.a / (c * (p - 1)) * 1e6;
  f.max_rel_error = max_rel_error(l, x, t);
  f.samples = std::move(samples);
  return f;
}

GemmFit fit_gemm(const std::vector<GemmSample>& samples) {
  AXONN_CHECK_ARG(!samples.empty(), "no GEMM samples to fit");
  std::vector<double> x, t;
  for (const auto& s : samples) {
    AXONN_CHECK_ARG(s.m > 0 && s.n > 0 && s.k > 0 && s.seconds > 0, "a GEMM sample needs m, n, k, seconds > 0");
    x.push_back(s.flops());
    t.push_back(s.seconds);
  }
  const Line l = fit_line(x, t);
  return {1.0 / l.b * 1e-9, l.a * 1e6, max_rel_error(l, x, t)};
}

std::string calibration_profile_json(const Calibration& c) {
  using nlohmann::ordered_json;
  AXONN_CHECK_ARG(c.gemm_fit.gflops > 0, "calibration without a GEMM rate");
  AXONN_CHECK_ARG(c.memory_gib > 0 && c.stream_gbs > 0, "calibration without memory size or stream bandwidth");
  AXONN_CHECK_ARG(c.ranks >= 1 && c.ranks_per_node >= 1 && c.nodes >= 1, "calibration without rank counts");

  // Fallbacks for positions not measured: the widest intra-node all-reduce ring at ip = 1, the
  // narrowest inter-node one; α the median of the fitted ones.
  const CollectiveFit* intra = nullptr;
  const CollectiveFit* inter = nullptr;
  std::vector<double> alphas, intra_alphas, inter_alphas;
  for (const auto& f : c.collectives) {
    alphas.push_back(f.latency_us);
    (f.intra_node ? intra_alphas : inter_alphas).push_back(f.latency_us);
    if (f.kind != CollectiveKind::kAllReduce || f.ip != 1 || f.async) continue;
    if (f.intra_node && (!intra || f.size > intra->size)) intra = &f;
    if (!f.intra_node && (!inter || f.size < inter->size)) inter = &f;
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double alpha = median(alphas);
  const double intra_gbs = intra ? intra->gbs : (inter ? inter->gbs : c.stream_gbs);
  const double inter_gbs = inter ? inter->gbs : intra_gbs;

  ordered_json rules = ordered_json::array();
  for (const auto& f : c.collectives) {
    std::vector<CollectiveSample> sorted = f.samples;
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
    ordered_json samples = ordered_json::array();
    double last = 0;
    for (const auto& s : sorted)
      if (s.bytes > last) {  // strictly ascending, as the parser wants
        samples.push_back({s.bytes, rounded(s.seconds)});
        last = s.bytes;
      }
    rules.push_back({{"op", std::string(to_string(f.kind))},
                     {"ip", f.ip},
                     {"size", f.size},
                     {"gbs", rounded(f.gbs)},
                     {"latency_us", rounded(f.latency_us)},
                     {"samples", samples}});
    if (f.async) rules.back()["async"] = true;
  }

  std::string where = c.host.empty() ? "this machine" : c.host;
  ordered_json sources = ordered_json::array();
  sources.push_back("axonn calibrate" + std::string(c.quick ? " --quick" : "") + ", " + c.date + ", on " + where +
                    ": " + std::to_string(c.ranks) + " ranks on " + std::to_string(c.nodes) + " node(s), " +
                    std::to_string(c.threads_per_rank) + " thread(s) per rank");
  sources.push_back("peak_tflops: sgemm (" + c.gemm_backend + ") fitted as t = gemm_call_us + 2mnk/rate on the shapes of "
                    "calibration.gemm, every rank at once; gemm_efficiency 1 (the rate is already sustained)");
  sources.push_back("hbm_gbs: bytes per second of the AdamW kernel (28 bytes per parameter, arrays beyond the caches) per "
                    "rank, every rank at once; memory_gib: the node's memory / ranks on it");
  sources.push_back("bandwidth_gbs: one rule per collective and position (ip, size): samples = measured time per call "
                    "by message size (every group of the position at once), which the planner interpolates; gbs and "
                    "latency_us = the fit t = c(p-1)·latency_us + c(p-1)/p·M/gbs to them (beyond the largest size, and "
                    "the summary); \"async\": the same timed as *_async + wait, the form the trainer issues all "
                    "but its forward all-reduces and LayerNorm statistics in");
  sources.push_back("sync_us: time per iteration of [compute burst, 8-byte all-reduce over all ranks] minus the burst "
                    "alone and minus that all-reduce in a tight loop: what a collective costs between computations "
                    "beyond its own time");
  sources.push_back(inter ? "inter_node_gbs: the narrowest inter-node all-reduce measured"
                          : "inter_node_gbs: not measured (one node): a copy of intra_node_gbs");
  if (!inter_alphas.empty())
    sources.push_back("intra_node_latency_us, inter_node_latency_us: the median latency_us of the positions inside "
                      "a node and of those across nodes");
  sources.push_back("calibration.mfu_peak: the peak axonn train reports MFU against (not the planner's rate)");
  if (!intra && !inter)
    sources.push_back("intra_node_gbs: no collective measured (one rank): the stream bandwidth stands in");

  ordered_json gemm = ordered_json::array();
  for (const auto& g : c.gemm)
    gemm.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"seconds", g.seconds},
                    {"gflops", rounded(g.flops() / g.seconds * 1e-9)}});
  ordered_json colls = ordered_json::array();
  for (const auto& f : c.collectives)
    colls.push_back({{"op", std::string(to_string(f.kind))},
                     {"ip", f.ip},
                     {"size", f.size},
                     {"async", f.async},
                     {"intra_node", f.intra_node},
                     {"alpha_beta_max_rel_error", rounded(f.max_rel_error, 3)}});

  ordered_json doc = {
      {"name", c.name},
      {"description", "calibrated by axonn calibrate on " + where + " (" + (c.cpu.empty() ? "CPU" : c.cpu) + "), " +
                          std::to_string(c.ranks) + " MPI ranks x " + std::to_string(c.threads_per_rank) +
                          " thread(s); models this project's CPU training step (implementation axonn-cpp)"},
      {"sources", sources},
      {"implementation", "axonn-cpp"},
      {"gpus_per_node", c.ranks_per_node},
      {"gpu",
       {{"name", (c.cpu.empty() ? std::string("CPU") : c.cpu) + ", " + std::to_string(c.threads_per_rank) +
                     " thread(s) per rank, " + c.gemm_backend + " sgemm"},
        {"memory_gib", rounded(c.memory_gib)},
        {"peak_tflops", rounded(c.gemm_fit.gflops * 1e-3)},
        {"gemm_efficiency", 1.0},
        {"gemm_call_us", rounded(c.gemm_fit.call_us)},
        {"hbm_gbs", rounded(c.stream_gbs)}}},
      {"network",
       {{"latency_us", rounded(alpha)},
        {"sync_us", rounded(std::max(0.0, c.sync_us))},
        {"intra_node_gbs", rounded(intra_gbs)},
        {"inter_node_gbs", rounded(inter_gbs)},
        {"bandwidth_gbs", rules}}},
      {"calibration",
       {{"date", c.date},
        {"host", c.host},
        {"ranks", c.ranks},
        {"nodes", c.nodes},
        {"ranks_per_node", c.ranks_per_node},
        {"threads_per_rank", c.threads_per_rank},
        {"gemm_backend", c.gemm_backend},
        {"quick", c.quick},
        {"stream_gbs", rounded(c.stream_gbs)},
        {"cpu", c.cpu},
        {"gemm_fit_max_rel_error", rounded(c.gemm_fit.max_rel_error, 3)},
        {"gemm", gemm},
        {"collectives", colls}}},
  };
  // Recorded, not applied: with these shares as network.intra_node_overlap / inter_node_overlap the
  // predictions on the namespace hosts of docs/multi-host.md ranked the grids worse, not better; a
  // profile applies them only where someone writes them into "network".
  if (c.intra_node_overlap >= 0 || c.inter_node_overlap >= 0) {
    ordered_json overlap = {{"method", "(burst + all-reduce - both) / min(burst, all-reduce), clamped to 0-1, for [a "
                                       "non-blocking 256 KiB all-reduce with a burst of 256^3 sgemms about as long "
                                       "under it] against each alone, in the narrowest position inside a node and "
                                       "across nodes: the share of a collective in flight that computation covers; "
                                       "network.intra_node_overlap / inter_node_overlap take such shares"}};
    if (c.intra_node_overlap >= 0) overlap["intra_node"] = rounded(c.intra_node_overlap, 3);
    if (c.inter_node_overlap >= 0) overlap["inter_node"] = rounded(c.inter_node_overlap, 3);
    doc["calibration"]["overlap"] = overlap;
  }
  if (!inter_alphas.empty() && !intra_alphas.empty()) {  // several nodes: the two levels' latencies
    doc["network"]["intra_node_latency_us"] = rounded(median(intra_alphas));
    doc["network"]["inter_node_latency_us"] = rounded(median(inter_alphas));
  }
  if (c.mfu_peak_fp32_gflops > 0 && c.mfu_peak_bf16_gflops > 0)
    doc["calibration"]["mfu_peak"] = {
        {"fp32_gflops_per_rank", rounded(c.mfu_peak_fp32_gflops)},
        {"bf16_gflops_per_rank", rounded(c.mfu_peak_bf16_gflops)},
        {"bf16_gemm", c.bf16_gemm},
        {"method", "best of several timings of several square sizes (sgemm; the bf16 GEMM), every rank at once, "
                   "the fastest rank's; axonn train reports MFU against it on the same CPU, ranks per node and "
                   "threads per rank"}};
  return doc.dump(2) + "\n";
}

}  // namespace axonn::planner
