// kernels/gemm_tuner.cpp — the layout variants of a GEMM and the tuner that picks one per shape
// (spec axonn.md §6). Backend-neutral: everything here goes through a GemmEngine.
#include "axonn/kernels/gemm_tuner.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>

#include "axonn/core/error.hpp"

namespace axonn::kernels {

namespace {

std::atomic<bool> g_tuning{false};

// Replaces operand X (A or B) of `g` by a transposed copy in the engine's workspace, so the BLAS
// reads it in the other layout: op(X) is unchanged, its flag flips. X is stored [rows, cols].
void transpose_operand(GemmEngine& e, const float*& x, int64_t& ld, bool& trans, int64_t rows, int64_t cols) {
  float* copy = e.workspace(kWorkspaceCopy, static_cast<size_t>(rows) * static_cast<size_t>(cols));
  e.transpose(copy, rows, x, rows, cols, ld, false, 0.0f);
  x = copy;
  ld = rows;
  trans = !trans;
}

// The operands after the variant's copy (a copy of the original call when there is none).
GemmCall with_copy(const GemmCall& call, GemmCopy copy, GemmEngine* e) {
  GemmCall g = call;
  if (copy == GemmCopy::kA) {
    const int64_t rows = call.trans_a ? call.K : call.M, cols = call.trans_a ? call.M : call.K;
    if (e) {
      transpose_operand(*e, g.A, g.lda, g.trans_a, rows, cols);
    } else {
      g.trans_a = !g.trans_a;
    }
  } else if (copy == GemmCopy::kB) {
    const int64_t rows = call.trans_b ? call.N : call.K, cols = call.trans_b ? call.K : call.N;
    if (e) {
      transpose_operand(*e, g.B, g.ldb, g.trans_b, rows, cols);
    } else {
      g.trans_b = !g.trans_b;
    }
  }
  return g;
}

// The swapped product D[N,M] = alpha * op(B)^T op(A)^T of the (copied) operands, into `d`:
// op(B)^T is B read with the opposite flag, and likewise for A.
GemmCall swapped(const GemmCall& g, float* d) {
  GemmCall s;
  s.trans_a = !g.trans_b;
  s.trans_b = !g.trans_a;
  s.M = g.N;
  s.N = g.M;
  s.K = g.K;
  s.alpha = g.alpha;
  s.A = g.B;
  s.lda = g.ldb;
  s.B = g.A;
  s.ldb = g.lda;
  s.beta = 0.0f;
  s.C = d;
  s.ldc = g.M;
  return s;
}

std::string flags(bool first, bool second) { return std::string(first ? "T" : "N") + (second ? "T" : "N"); }

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e3);
  return buf;
}

}  // namespace

std::string gemm_variant_name(GemmVariant v) {
  std::string s = v.orientation == GemmOrientation::kAsIssued ? "as-issued" : "swapped";
  if (v.copy == GemmCopy::kA) s += "+copyA";
  if (v.copy == GemmCopy::kB) s += "+copyB";
  return s;
}

GemmVariant parse_gemm_variant(std::string_view name) {
  std::string all;
  for (GemmVariant v : kGemmVariants) {
    if (gemm_variant_name(v) == name) return v;
    all += (all.empty() ? "" : ", ") + gemm_variant_name(v);
  }
  throw InvalidArgument(detail::concat("unknown GEMM variant '", name, "'; use one of ", all));
}

std::string gemm_variant_layout(const GemmCall& call, GemmVariant v) {
  const GemmCall g = with_copy(call, v.copy, nullptr);
  return v.orientation == GemmOrientation::kAsIssued ? flags(g.trans_a, g.trans_b) : flags(!g.trans_b, !g.trans_a);
}

void run_gemm_variant(GemmEngine& engine, const GemmCall& call, GemmVariant v) {
  // C[M,N] = alpha op(A) op(B) + beta C; with K = 0 there is no product to lay out
  if (call.M == 0 || call.N == 0 || call.K == 0 || v == kAsIssued) {
    engine.sgemm(call);
    return;
  }
  const GemmCall g = with_copy(call, v.copy, &engine);
  if (v.orientation == GemmOrientation::kAsIssued) {
    engine.sgemm(g);
    return;
  }
  // Swapped: the product goes to a temporary D[N,M] with beta = 0, then C = D^T + beta C. alpha is
  // applied inside the GEMM, as in the as-issued call, so with beta = 1 (accumulating weight
  // gradients) C gets the same alpha * sum added, in one rounding; beta = 0 never reads C.
  float* d = engine.workspace(kWorkspaceResult, static_cast<size_t>(call.M) * static_cast<size_t>(call.N));
  engine.sgemm(swapped(g, d));
  engine.transpose(call.C, call.ldc, d, call.N, call.M, call.M, call.beta != 0.0f, call.beta);
}

double GemmTuneRecord::speedup() const {
  double as_issued = 0, chosen_s = 0;
  for (const auto& c : candidates) {
    if (c.variant == kAsIssued) as_issued = c.seconds;
    if (c.variant == chosen) chosen_s = c.seconds;
  }
  return chosen_s > 0 ? as_issued / chosen_s : 1.0;
}

std::string GemmTuneRecord::str() const {
  char head[256];
  std::snprintf(head, sizeof head, "%s %s M=%lld N=%lld K=%lld %s: %s (%.2fx vs as-issued) | ms:", key.engine.c_str(),
                key.site.c_str(), static_cast<long long>(key.m), static_cast<long long>(key.n),
                static_cast<long long>(key.k), flags(key.trans_a, key.trans_b).c_str(),
                gemm_variant_name(chosen).c_str(), speedup());
  std::string s = head;
  for (const auto& c : candidates) {
    s += ' ';
    s += gemm_variant_name(c.variant);
    s += '[';
    s += c.layout;
    s += "] ";
    s += ms(c.seconds);
  }
  return s;
}

void GemmTuner::gemm(GemmEngine& engine, std::string_view site, const GemmCall& call) {
  if (call.M == 0 || call.N == 0 || call.K == 0) {  // nothing to lay out
    engine.sgemm(call);
    return;
  }
  const GemmTuneKey key{engine.name(), std::string(site), call.M, call.N, call.K, call.trans_a, call.trans_b,
                        DType::kF32};
  std::optional<GemmVariant> v;
  GemmTuneOptions opt;
  {
    std::lock_guard lock(mu_);
    if (forced_) {
      v = forced_;
    } else if (auto it = index_.find(key); it != index_.end()) {
      v = records_[it->second].chosen;
    }
    opt = options_;
  }
  if (!v) {
    std::lock_guard tuning(tune_mu_);
    v = cached(key);  // another thread may have tuned it while this one waited
    if (!v) {
      GemmCall timed = call;
      if (call.beta != 0.0f) {
        // The variants accumulate into C: time them on a copy, so the call's C is written once,
        // by the chosen variant below. (With beta = 0 that final call overwrites C anyway.)
        float* scratch =
            engine.workspace(kWorkspaceTiming, static_cast<size_t>(call.M) * static_cast<size_t>(call.N));
        engine.copy(scratch, call.N, call.C, call.M, call.N, call.ldc);
        timed.C = scratch;
        timed.ldc = call.N;
      }
      for (GemmVariant w : kGemmVariants)
        for (int i = 0; i < opt.warmup; i++) run_gemm_variant(engine, timed, w);
      // interleaved: a burst of load from another process slows every variant alike
      std::vector<double> best(kGemmVariants.size(), std::numeric_limits<double>::infinity());
      for (int r = 0; r < opt.reps; r++)
        for (size_t i = 0; i < kGemmVariants.size(); i++)
          best[i] = std::min(best[i], engine.time([&] { run_gemm_variant(engine, timed, kGemmVariants[i]); }));
      engine.release_workspace();  // the chosen variant takes back only what it needs
      size_t pick = 0;
      for (size_t i = 1; i < best.size(); i++)
        if (best[i] < best[pick]) pick = i;
      if (pick != 0 && best[pick] > best[0] * (1.0 - opt.min_gain)) pick = 0;  // within noise of as-issued
      GemmTuneRecord rec;
      rec.key = key;
      rec.chosen = kGemmVariants[pick];
      for (size_t i = 0; i < kGemmVariants.size(); i++)
        rec.candidates.push_back({kGemmVariants[i], gemm_variant_layout(call, kGemmVariants[i]), best[i]});
      v = rec.chosen;
      std::lock_guard lock(mu_);
      index_[key] = records_.size();
      records_.push_back(std::move(rec));
    }
  }
  run_gemm_variant(engine, call, *v);
}

std::optional<GemmVariant> GemmTuner::cached(const GemmTuneKey& key) const {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return records_[it->second].chosen;
}

void GemmTuner::force(std::optional<GemmVariant> v) {
  std::lock_guard lock(mu_);
  forced_ = v;
}

void GemmTuner::set_options(const GemmTuneOptions& o) {
  AXONN_CHECK_ARG(o.warmup >= 0 && o.reps >= 1 && o.min_gain >= 0 && o.min_gain < 1,
                  "GEMM tuner options: need warmup >= 0, reps >= 1 and 0 <= min_gain < 1, got warmup=", o.warmup,
                  " reps=", o.reps, " min_gain=", o.min_gain);
  std::lock_guard lock(mu_);
  options_ = o;
}

GemmTuneOptions GemmTuner::options() const {
  std::lock_guard lock(mu_);
  return options_;
}

std::vector<GemmTuneRecord> GemmTuner::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

std::vector<std::string> GemmTuner::report_lines() const {
  std::vector<std::string> lines;
  for (const auto& r : records()) lines.push_back(r.str());
  return lines;
}

void GemmTuner::clear() {
  std::lock_guard lock(mu_);
  index_.clear();
  records_.clear();
}

GemmTuner& gemm_tuner() {
  static GemmTuner tuner;
  return tuner;
}

void set_gemm_tuning(bool on) { g_tuning.store(on); }
bool gemm_tuning() { return g_tuning.load(); }

bool parse_gemm_tuning(std::string_view text) {
  if (text == "on") return true;
  if (text == "off") return false;
  throw InvalidArgument(detail::concat("--gemm-tuning takes on or off, got '", text, "'"));
}

}  // namespace axonn::kernels
