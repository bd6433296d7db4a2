// Test helpers: deterministic random buffers and allclose with a useful failure message.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "axonn/core/dtype.hpp"

namespace axonn::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// bf16 vectors (uint16_t storage, core/dtype.hpp's conversions): rounded from fp32, widened back exactly,
// and random ones (randn rounded; the inputs both implementations of a bf16 op see).
inline std::vector<uint16_t> to_bf(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); i++) b[i] = f32_to_bf16(v[i]);
  return b;
}
inline std::vector<float> widen(const std::vector<uint16_t>& b) {
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); i++) v[i] = bf16_to_f32(b[i]);
  return v;
}
inline std::vector<uint16_t> rand_bf(size_t n, uint32_t seed, float scale = 1.0f) {
  return to_bf(randn(n, seed, scale));
}

inline std::vector<int> randint(size_t n, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(0, hi - 1);
  std::vector<int> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// |a - b| <= atol + rtol * |b| (+ atol_each[i] when given) elementwise; on failure reports the count, the
// worst element and the first few mismatches.
inline ::testing::AssertionResult allclose(const float* a, const float* b, size_t n, float atol, float rtol,
                                           const float* atol_each = nullptr) {
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  std::ostringstream first;
  for (size_t i = 0; i < n; i++) {
    double d = std::fabs((double)a[i] - (double)b[i]);
    double tol = atol + rtol * std::fabs((double)b[i]) + (atol_each ? atol_each[i] : 0.0);
    if (!(d <= tol)) {
      if (bad < 5) first << "  [" << i << "] " << a[i] << " vs " << b[i] << "\n";
      bad++;
      if (d - tol > worst_excess) {
        worst_excess = d - tol;
        worst = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " elements differ (atol " << atol << ", rtol "
                                       << rtol << "); worst [" << worst << "] " << a[worst] << " vs " << b[worst]
                                       << "\n"
                                       << first.str();
}

inline ::testing::AssertionResult allclose(const std::vector<float>& a, const std::vector<float>& b, float atol,
                                           float rtol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  return allclose(a.data(), b.data(), a.size(), atol, rtol);
}
// The same with a per-element absolute term added to the tolerance (a bound that depends on the element).
inline ::testing::AssertionResult allclose(const std::vector<float>& a, const std::vector<float>& b, float atol,
                                           float rtol, const std::vector<float>& atol_each) {
  if (a.size() != b.size() || a.size() != atol_each.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size() << " vs "
                                         << atol_each.size();
  return allclose(a.data(), b.data(), a.size(), atol, rtol, atol_each.data());
}

}  // namespace axonn::test
