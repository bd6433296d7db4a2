#include "axonn/train/trace_summary.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"

namespace axonn::train {
namespace {

using Interval = std::pair<double, double>;

// Sorted, disjoint intervals covering the same points as `v`.
std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second)
      out.back().second = std::max(out.back().second, i.second);
    else
      out.push_back(i);
  }
  return out;
}

double length(const std::vector<Interval>& v) {
  double t = 0;
  for (const Interval& i : v) t += i.second - i.first;
  return t;
}

// a ∩ b of two merged lists (merged).
std::vector<Interval> intersect(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo < hi) out.push_back({lo, hi});
    (a[i].second < b[j].second) ? i++ : j++;
  }
  return out;
}

// a \ b of two merged lists (merged).
std::vector<Interval> subtract(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  std::vector<Interval> out;
  size_t j = 0;
  for (Interval i : a) {
    while (j < b.size() && b[j].second <= i.first) j++;
    size_t k = j;
    while (k < b.size() && b[k].first < i.second) {
      if (b[k].first > i.first) out.push_back({i.first, b[k].first});
      i.first = std::max(i.first, b[k].second);
      k++;
    }
    if (i.first < i.second) out.push_back(i);
  }
  return out;
}

struct RankSpans {
  std::string name;
  std::vector<Interval> compute, comm, blocking, all;
  std::map<std::string, std::vector<Interval>> by_track;
  int spans = 0;
};

}  // namespace

std::vector<TraceRankSummary> summarize_trace(const std::string& json_text) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, false);
  AXONN_CHECK_ARG(!doc.is_discarded(), "the trace is not valid JSON");
  const nlohmann::json* events = &doc;
  if (doc.is_object()) {
    AXONN_CHECK_ARG(doc.contains("traceEvents") && doc["traceEvents"].is_array(),
                    "the trace has no \"traceEvents\" array (is it a Chrome trace-event file?)");
    events = &doc["traceEvents"];
  }
  AXONN_CHECK_ARG(events->is_array(), "the trace is neither an object with \"traceEvents\" nor an array of events");
  std::map<int, RankSpans> ranks;
  // A field of the wrong type (a "pid" that is a string, ...) throws nlohmann's type_error from get<>
  // and value(): it is the trace's fault, so it is reported as the malformed input it is.
  try {
    for (const nlohmann::json& e : *events) {
      AXONN_CHECK_ARG(e.is_object() && e.contains("ph") && e.contains("pid"), "a trace event lacks \"ph\" or \"pid\": ",
                      e.dump().substr(0, 200));
      // a process id is a whole number an int holds: converting anything else to int is undefined
      const double pid_value = e["pid"].is_number() ? e["pid"].get<double>() : std::nan("");
      AXONN_CHECK_ARG(std::floor(pid_value) == pid_value && pid_value >= std::numeric_limits<int>::min() &&
                          pid_value <= std::numeric_limits<int>::max(),
                      "a trace event's \"pid\" is not a whole number that an int holds: ", e["pid"].dump());
      const int pid = static_cast<int>(pid_value);
      const std::string ph = e["ph"].get<std::string>();
      RankSpans& r = ranks[pid];
      if (ph == "M") {
        if (e.value("name", "") == "process_name" && e.contains("args")) r.name = e["args"].value("name", "");
        continue;
      }
      if (ph != "X") continue;
      AXONN_CHECK_ARG(e.contains("ts") && e.contains("dur"), "a complete event lacks \"ts\" or \"dur\": ",
                      e.dump().substr(0, 200));
      const double b = e["ts"].get<double>(), en = b + e["dur"].get<double>();
      const std::string cat = e.value("cat", "");
      r.spans++;
      r.all.push_back({b, en});
      if (cat == "compute") {
        r.compute.push_back({b, en});
      } else if (cat == "comm") {
        r.comm.push_back({b, en});
        const nlohmann::json args = e.value("args", nlohmann::json::object());
        if (args.value("blocking", false)) r.blocking.push_back({b, en});
        r.by_track[args.value("track", e.value("name", "?"))].push_back({b, en});
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(std::string("the trace has a field of the wrong type: ") + e.what());
  }
  std::vector<TraceRankSummary> out;
  for (auto& [pid, r] : ranks) {
    TraceRankSummary s;
    s.pid = pid;
    s.name = r.name;
    s.spans = r.spans;
    const auto all = merged(r.all), comm = merged(r.comm);
    const auto compute = subtract(merged(r.compute), merged(r.blocking));
    s.wall_ms = all.empty() ? 0 : (all.back().second - all.front().first) * 1e-3;
    s.compute_ms = length(compute) * 1e-3;
    s.comm_ms = length(comm) * 1e-3;
    s.hidden_ms = length(intersect(comm, compute)) * 1e-3;
    s.exposed_ms = s.comm_ms - s.hidden_ms;
    s.hidden_fraction = s.comm_ms > 0 ? s.hidden_ms / s.comm_ms : 0;
    for (auto& [track, v] : r.by_track) s.comm_ms_by_track.push_back({track, length(merged(v)) * 1e-3});
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<TraceRankSummary> summarize_trace_file(const std::string& path) {
  std::ifstream f(path);
  AXONN_CHECK_IO(f.good(), "cannot read trace file '", path, "'");
  std::stringstream text;
  text << f.rdbuf();
  try {
    return summarize_trace(text.str());
  } catch (const InvalidArgument& e) {  // which file, as the report says it
    throw InvalidArgument("trace file '" + path + "': " + e.what());
  }
}

void print_trace_summary(FILE* out, const std::vector<TraceRankSummary>& ranks) {
  std::fprintf(out, "%-5s %10s %11s %10s %10s %8s %11s  %s\n", "rank", "wall ms", "compute ms", "comm ms",
               "hidden ms", "hidden", "exposed ms", "process");
  for (const TraceRankSummary& r : ranks)
    std::fprintf(out, "%-5d %10.2f %11.2f %10.2f %10.2f %7.1f%% %11.2f  %s\n", r.pid, r.wall_ms, r.compute_ms,
                 r.comm_ms, r.hidden_ms, 100.0 * r.hidden_fraction, r.exposed_ms, r.name.c_str());
  std::fprintf(out, "\ncommunication per track (ms with a collective in flight):\n");
  for (const TraceRankSummary& r : ranks) {
    std::fprintf(out, "  rank %d:", r.pid);
    for (const auto& [track, ms] : r.comm_ms_by_track) std::fprintf(out, "  %s %.2f", track.c_str(), ms);
    std::fprintf(out, "\n");
  }
}

std::string trace_summary_json(const std::vector<TraceRankSummary>& ranks) {
  nlohmann::json a = nlohmann::json::array();
  for (const TraceRankSummary& r : ranks) {
    nlohmann::json tracks = nlohmann::json::object();
    for (const auto& [track, ms] : r.comm_ms_by_track) tracks[track] = ms;
    a.push_back({{"rank", r.pid},
                 {"name", r.name},
                 {"wall_ms", r.wall_ms},
                 {"compute_ms", r.compute_ms},
                 {"comm_ms", r.comm_ms},
                 {"hidden_ms", r.hidden_ms},
                 {"exposed_ms", r.exposed_ms},
                 {"hidden_fraction", r.hidden_fraction},
                 {"spans", r.spans},
                 {"comm_ms_by_track", tracks}});
  }
  return a.dump(2);
}

}  // namespace axonn::train
