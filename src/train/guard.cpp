// train/guard.cpp — the numerical guard (include/axonn/train/guard.hpp).
#include "axonn/train/guard.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

namespace axonn::train {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kUpdate: return "update";
    case Verdict::kNonFinite: return "non-finite";
    case Verdict::kLossOutlier: return "loss-outlier";
    case Verdict::kGradOutlier: return "grad-outlier";
  }
  return "?";
}

double OutlierDetector::z(double x) const {
  if (static_cast<int>(values_.size()) < window_) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0, sq = 0;
  for (double v : values_) {
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(values_.size());
  const double mean = sum / n;
  const double var = sq / n - mean * mean;
  return (x - mean) / std::sqrt(std::max(var, 0.0));
}

void OutlierDetector::add(double x) {
  values_.push_back(x);
  if (static_cast<int>(values_.size()) > window_) values_.pop_front();
}

std::string OutlierDetector::to_text() const {
  std::string s;
  char buf[32];
  for (double v : values_) {
    std::snprintf(buf, sizeof buf, "%.17g", v);
    if (!s.empty()) s += ',';
    s += buf;
  }
  return s;
}

void OutlierDetector::from_text(const std::string& text) {
  std::deque<double> values;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
      throw std::invalid_argument("'" + item + "' is not a finite number");
    values.push_back(v);
    at = comma == std::string::npos ? text.size() : comma + 1;
  }
  if (static_cast<int>(values.size()) > window_)
    throw std::invalid_argument(std::to_string(values.size()) + " values, more than the window of " +
                                std::to_string(window_));
  values_ = std::move(values);
}

Verdict StepGuard::judge(float loss, double norm) {
  if (!std::isfinite(loss) || !std::isfinite(norm)) return Verdict::kNonFinite;
  const double zl = losses_.z(loss), zg = norms_.z(norm);
  losses_.add(loss);
  norms_.add(norm);
  if (loss_z_ > 0 && std::isfinite(zl) && zl > loss_z_) return Verdict::kLossOutlier;
  if (grad_z_ > 0 && std::isfinite(zg) && zg > grad_z_) return Verdict::kGradOutlier;
  return Verdict::kUpdate;
}

}  // namespace axonn::train
