#include "axonn/report/metrics.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"

namespace axonn::report {
namespace {

// A number, or NaN for null (nlohmann::json writes NaN and infinity as null).
double number(const nlohmann::json& v, const std::string& key, const std::string& where) {
  if (v.is_null()) return std::nan("");
  AXONN_CHECK_ARG(v.is_number(), where, ": \"", key, "\" is ", v.dump().substr(0, 40),
                  ", not a number; each key of a metrics line holds a number (or null)");
  return v.get<double>();
}

}  // namespace

std::vector<MetricsRecord> parse_metrics(std::string_view text, const std::string& name) {
  std::vector<MetricsRecord> out;
  int line_no = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    line_no++;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank
    const std::string where = "metrics file '" + name + "', line " + std::to_string(line_no);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    AXONN_CHECK_ARG(!j.is_discarded(), where, ": not valid JSON: '", std::string(line.substr(0, 80)),
                    line.size() > 80 ? "...'" : "'", " (each line of a metrics file is one JSON object)");
    AXONN_CHECK_ARG(j.is_object(), where, ": not a JSON object (each line of a metrics file is one JSON object)");
    AXONN_CHECK_ARG(j.contains("step") && j["step"].is_number_integer(), where,
                    ": no integer \"step\" (every metrics line has the 0-based step it belongs to)");
    MetricsRecord r;
    r.line = line_no;
    r.step = j["step"].get<int64_t>();
    const std::pair<const char*, std::optional<double>*> keys[] = {
        {"loss", &r.loss},       {"val_loss", &r.val_loss}, {"lr", &r.lr},   {"grad_norm", &r.grad_norm},
        {"step_ms", &r.step_ms}, {"tokens_per_s", &r.tokens_per_s}, {"mfu", &r.mfu}, {"tokens", &r.tokens},
        {"loss_all_tokens", &r.loss_all_tokens}, {"loss_dropped_tokens", &r.loss_dropped_tokens},
        {"goldfish_dropped_fraction", &r.dropped_fraction}};
    for (const auto& [key, value] : keys)
      if (j.contains(key)) *value = number(j[key], key, where);
    if (j.contains("memory_bytes")) {
      const nlohmann::json& m = j["memory_bytes"];
      if (m.is_array())
        for (const nlohmann::json& v : m) r.memory_bytes.push_back(number(v, "memory_bytes", where));
      else
        r.memory_bytes.push_back(number(m, "memory_bytes", where));
    }
    out.push_back(std::move(r));
  }
  AXONN_CHECK_ARG(!out.empty(), "metrics file '", name,
                  "' is empty: no step was recorded (did the run reach its first step? is it the file given to "
                  "`axonn train --metrics`?)");
  return out;
}

std::vector<MetricsRecord> read_metrics_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  AXONN_CHECK_IO(f.good(), "cannot read metrics file '", path, "'");
  std::stringstream text;
  text << f.rdbuf();
  return parse_metrics(text.str(), path);
}

std::vector<double> cumulative_tokens(const std::vector<MetricsRecord>& records) {
  std::vector<double> out;
  double sum = 0;
  bool known = false;
  for (const MetricsRecord& r : records) {
    const double tokens = r.tokens.value_or(NAN), per_s = r.tokens_per_s.value_or(NAN), ms = r.step_ms.value_or(NAN);
    if (std::isfinite(tokens)) {
      sum = tokens;
      known = true;
    } else if (std::isfinite(per_s) && std::isfinite(ms)) {
      sum += per_s * ms / 1e3;
      known = true;
    }
    out.push_back(known ? sum : std::nan(""));
  }
  return out;
}

}  // namespace axonn::report
