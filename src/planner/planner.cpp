// Search over 4D grids: enumerate, filter by divisibility, estimate, rank.
#include "axonn/planner/planner.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>

#include "axonn/core/error.hpp"

namespace axonn::planner {

namespace {

std::vector<long> divisors(long n) {
  std::vector<long> small, large;
  for (long i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    small.push_back(i);
    if (i != n / i) large.push_back(n / i);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

// The first reason a grid cannot run the workload: a short category (for the summary when nothing
// is admissible) and the full sentence.
struct Reason {
  std::string category;
  std::string message;
};

std::optional<Reason> first_reason(const Workload& w, const GridShape& g, long min_tp) {
  if (g.tensor_parallel() < min_tp)
    return Reason{detail::concat("Gx*Gy*Gz below --min-tp ", min_tp),
                  detail::concat("Gx*Gy*Gz = ", g.tensor_parallel(), " is below the minimum tensor-parallel ",
                                 "degree ", min_tp, " (--min-tp)")};
  const long shards = g.gdata * g.gz * w.grad_accumulation;
  if (w.batch_size % shards != 0)
    return Reason{"batch size not divisible by Gdata*Gz",
                  detail::concat("batch size ", w.batch_size, " is not divisible by Gdata*Gz",
                                 w.grad_accumulation > 1 ? "*micro-batches" : "", " = ", shards)};
  if (auto why = model::grid_misfit(w.spec(), g.gx, g.gy, g.gz)) return Reason{why->category, why->message};
  return std::nullopt;
}

}  // namespace

std::vector<GridShape> factorizations(long g) {
  AXONN_CHECK_ARG(g >= 1 && g <= std::numeric_limits<int>::max(), "--gpus must be between 1 and ",
                  std::numeric_limits<int>::max(), ", got ", g);
  const auto i = [](long v) { return static_cast<int>(v); };
  std::vector<GridShape> out;
  for (long gx : divisors(g))
    for (long gy : divisors(g / gx))
      for (long gz : divisors(g / gx / gy)) out.push_back({i(gx), i(gy), i(gz), i(g / gx / gy / gz)});
  return out;
}

std::optional<std::string> inadmissible_reason(const Workload& w, const GridShape& g, long min_tp) {
  if (auto r = first_reason(w, g, min_tp)) return r->message;
  return std::nullopt;
}

long micro_batch_size(const Workload& w, const Estimate& e) {
  return w.batch_size / (e.grid.gdata * e.grid.gz) / e.micro_batches;
}

std::optional<Estimate> fastest_fit(const MachineProfile& m, const Workload& w, const GridShape& g,
                                    const CostSettings& s) {
  const long per_rank = w.batch_size / (g.gdata * g.gz);
  std::optional<Estimate> best;
  for (const bool recompute : {false, true}) {
    CostSettings with = s;
    with.recompute = recompute;
    for (const long micro : divisors(per_rank)) {
      Workload split = w;
      split.grad_accumulation = micro;
      Estimate e = estimate(m, split, g, with);
      if (e.fits && (!best || e.total_s < best->total_s)) best = std::move(e);
    }
  }
  return best;
}

PlanResult plan(const MachineProfile& m, const PlanRequest& req) {
  req.workload.validate();
  AXONN_CHECK_ARG(req.gpus >= 1, "--gpus must be positive, got ", req.gpus);
  AXONN_CHECK_ARG(req.min_tp >= 1, "--min-tp must be positive, got ", req.min_tp);
  AXONN_CHECK_ARG(req.min_tp <= req.gpus, "--min-tp ", req.min_tp, " is larger than --gpus ", req.gpus,
                  "; lower --min-tp or use more GPUs");
  AXONN_CHECK_ARG(!req.search_memory || req.settings.variant == ModelVariant::kCorrected,
                  "the search over micro-batches and recompute needs the corrected model (AxoNN's comm_model.py, "
                  "as-coded, has its factors fixed)");

  PlanResult r;
  r.machine = m;
  r.request = req;
  const auto grids = factorizations(req.gpus);
  r.factorizations = static_cast<long>(grids.size());
  std::map<std::string, long> rejected;
  std::string example;
  for (GridShape g : grids) {
    if (auto why = first_reason(req.workload, g, req.min_tp)) {
      if (rejected[why->category]++ == 0 && example.empty()) example = to_string(g) + ": " + why->message;
      continue;
    }
    r.admissible++;
    // memory does not depend on the order: a grid fits in all its orders or in none
    bool first = true;
    for (const auto& order : req.search_orders ? layout::distinct_orders(g) : std::vector{req.order}) {
      g.order = order;
      std::optional<Estimate> fit;
      if (req.search_memory) fit = fastest_fit(m, req.workload, g, req.settings);
      r.configs.push_back(fit ? *fit : estimate(m, req.workload, g, req.settings));
      if (first && r.configs.back().fits) r.fitting++;
      first = false;
    }
  }
  if (r.configs.empty()) {
    std::ostringstream os;
    os << "no 4D grid of " << req.gpus << " " << req.unit << " can run this model and batch (" << r.factorizations
       << " factorizations Gx*Gy*Gz*Gdata tried:";
    const char* sep = " ";
    for (const auto& [what, n] : rejected) {
      os << sep << n << " " << what;
      sep = ", ";
    }
    os << "; e.g. " << example << "). " << req.advice;
    throw InvalidArgument(os.str());
  }

  // As-coded: AxoNN's criterion, communication time alone (its memory guard is --min-tp; `fits` is
  // reported, not used). Corrected: grids that fit first, then predicted step time. Stable: ties keep
  // the enumeration order, as Python's sorted() does in comm_model.py.
  const bool as_coded = req.settings.variant == ModelVariant::kAsCoded;
  std::stable_sort(r.configs.begin(), r.configs.end(), [as_coded](const Estimate& a, const Estimate& b) {
    if (as_coded) return a.comm_s < b.comm_s;
    if (a.fits != b.fits) return a.fits;
    return a.total_s < b.total_s;
  });
  return r;
}

}  // namespace axonn::planner
