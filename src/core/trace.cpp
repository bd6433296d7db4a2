#include "axonn/core/trace.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>

namespace axonn {
namespace {

const char* kind_name(SpanKind k) {
  switch (k) {
    case SpanKind::kCompute: return "compute";
    case SpanKind::kGroup: return "group";
    case SpanKind::kComm: return "comm";
  }
  return "?";
}

// Names come from the code (op and group names), but escape anyway: the file must parse.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

double Trace::now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Trace::add(Span span) {
  if (!recording()) return;
  if (span.step < 0) span.step = step_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  spans_.push_back(std::move(span));
}

std::vector<Trace::Span> Trace::spans() const {
  std::lock_guard lock(mu_);
  return spans_;
}

void Trace::clear() {
  std::lock_guard lock(mu_);
  spans_.clear();
}

double Trace::earliest_us() const {
  std::lock_guard lock(mu_);
  double t = std::numeric_limits<double>::infinity();
  for (const Span& s : spans_) t = std::min(t, s.begin_us);
  return t;
}

std::string Trace::chrome_events(int pid, const std::string& process_name, double origin_us) const {
  std::vector<Span> spans = this->spans();
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin_us < b.begin_us; });
  // tid 0 is the compute track; each communication track gets as many lanes (tids) as it has
  // collectives in flight at once, each span going to the first lane that is free at its begin.
  std::map<std::string, std::vector<double>> lanes_end;  // track -> end of each lane's last span
  std::vector<std::pair<std::string, int>> lane_of(spans.size());
  for (size_t i = 0; i < spans.size(); i++) {
    const Span& s = spans[i];
    if (s.track == "compute") {
      lane_of[i] = {s.track, 0};
      continue;
    }
    std::vector<double>& ends = lanes_end[s.track];
    size_t lane = 0;
    while (lane < ends.size() && ends[lane] > s.begin_us) lane++;
    if (lane == ends.size()) ends.push_back(0);
    ends[lane] = s.end_us;
    lane_of[i] = {s.track, static_cast<int>(lane)};
  }
  std::map<std::pair<std::string, int>, int> tid;  // (track, lane) -> tid; tracks in name order
  tid[{"compute", 0}] = 0;
  int next = 1;
  for (const auto& [track, ends] : lanes_end)
    for (int lane = 0; lane < static_cast<int>(ends.size()); lane++) tid[{track, lane}] = next++;

  std::string out;
  char buf[256];
  auto sep = [&] {
    if (!out.empty()) out += ",\n";
  };
  sep();
  std::snprintf(buf, sizeof buf, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":", pid);
  out += buf + json_string(process_name) + "}}";
  sep();
  std::snprintf(buf, sizeof buf, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, pid);
  out += buf;
  for (const auto& [key, t] : tid) {
    std::string name = key.first + (key.second > 0 ? " #" + std::to_string(key.second + 1) : "");
    sep();
    std::snprintf(buf, sizeof buf, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid,
                  t);
    out += buf + json_string(name) + "}}";
    sep();
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid,
                  t, t);
    out += buf;
  }
  for (size_t i = 0; i < spans.size(); i++) {
    const Span& s = spans[i];
    sep();
    out += "{\"ph\":\"X\",\"name\":" + json_string(s.name) + ",\"cat\":\"" + kind_name(s.kind) + "\"";
    std::snprintf(buf, sizeof buf, ",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%d", pid,
                  tid[lane_of[i]], s.begin_us - origin_us, std::max(0.0, s.end_us - s.begin_us), s.step);
    out += buf;
    if (s.kind == SpanKind::kComm) {
      std::snprintf(buf, sizeof buf, ",\"bytes\":%lld,\"blocking\":%s", static_cast<long long>(s.bytes),
                    s.blocking ? "true" : "false");
      out += buf + std::string(",\"track\":") + json_string(s.track);
    }
    out += "}}";
  }
  return out;
}

TraceScope::~TraceScope() {
  if (!trace_) return;
  Trace::Span s;
  s.name = name_;
  s.track = "compute";
  s.kind = kind_;
  s.begin_us = begin_;
  s.end_us = Trace::now_us();
  trace_->add(std::move(s));
}

}  // namespace axonn
