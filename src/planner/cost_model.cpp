// The cost model: collectives, compute and memory of one training step on one 4D grid.
// Derivations and the as-coded / corrected difference: docs/perf-model.md.
#include "axonn/planner/cost_model.hpp"

#include <algorithm>
#include <utility>

#include "axonn/core/error.hpp"
#include "axonn/planner/planner.hpp"
#include "cost_internal.hpp"

namespace axonn::planner {

std::string to_string(const GridShape& g) {
  const std::string extents = detail::concat("(Gx,Gy,Gz,Gdata)=(", g.gx, ",", g.gy, ",", g.gz, ",", g.gdata, ")");
  return g.axonn_order() ? extents : extents + " order " + layout::grid_order_str(g.order);
}

std::string_view to_string(ModelVariant v) { return v == ModelVariant::kAsCoded ? "as-coded" : "corrected"; }

ModelVariant parse_model_variant(std::string_view text) {
  if (text == "corrected") return ModelVariant::kCorrected;
  if (text == "as-coded") return ModelVariant::kAsCoded;
  throw InvalidArgument(detail::concat("unknown model variant '", text, "'; use corrected or as-coded"));
}

std::string_view to_string(CommGroup g) {
  switch (g) {
    case CommGroup::kX:
      return "X";
    case CommGroup::kY:
      return "Y";
    case CommGroup::kZ:
      return "Z";
    case CommGroup::kData:
      return "data";
    case CommGroup::kXY:
      return "X*Y";
    case CommGroup::kZData:
      return "Z*data";
    case CommGroup::kXYZ:
      return "X*Y*Z";
    case CommGroup::kZ2:
      return "Z2";
    case CommGroup::kWorld:
      return "world";
  }
  return "?";
}

namespace internal {

// Position of each group in the rank order: ip = its smallest stride (for a single axis, the
// product of the faster axes; X·Y and X·Y·Z start at 1 in AxoNN's order, Z·data at Gx·Gy).
long group_ip(CommGroup grp, const GridShape& g) {
  long ip = g.size();
  for (const layout::GridGroupSpan& a : layout::grid_group_spans(g, grp))
    if (a.extent > 1) ip = std::min(ip, long{a.stride});
  return ip == g.size() ? 1 : ip;
}

// Whether the group's ranks are group_ip apart: its axes of extent > 1, by stride, each start where
// the previous one ends.
bool group_is_ring(CommGroup grp, const GridShape& g) {
  std::vector<std::pair<long, long>> axes;  // (stride, extent)
  for (const layout::GridGroupSpan& a : layout::grid_group_spans(g, grp))
    if (a.extent > 1) axes.push_back({a.stride, a.extent});
  std::sort(axes.begin(), axes.end());
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i].first != axes[i - 1].first * axes[i - 1].second) return false;
  return true;
}

// For a group that is not a ring: whether the group of rank 0 lies inside node 0, and how many of
// its ranks node 0 holds (nodes of `per_node` consecutive ranks).
std::pair<bool, long> group_spread(CommGroup grp, const GridShape& g, long ranks_per_node) {
  long span = 1, in_node = 1;
  for (const layout::GridGroupSpan& a : layout::grid_group_spans(g, grp)) {
    const long e = a.extent, st = a.stride;
    span += (e - 1) * st;
    // members of the first node along this axis (strides of different axes never overlap)
    in_node *= std::min(e, std::max(1L, (ranks_per_node + st - 1) / st));
  }
  return {span <= ranks_per_node, in_node};
}

long group_size(CommGroup grp, const GridShape& g) { return layout::grid_group_size(g, grp); }

// Appends one collective (all its calls in a step) unless its group has a single rank.
//   ring volume per call: c·(p−1)/p·M, c = 2 for all-reduce, 1 for all-gather / reduce-scatter;
//   time = calls·(c·(p−1)/p·M / (β·unit) + c·(p−1)·α).
// The as-coded variant divides bytes by 2^30 for β "in GB/s" (comm_model.py's /1024/1024/1024),
// has no α and reads the table without regard to the collective; the corrected one reads β as 10^9
// bytes/s, and β and α of this collective where the profile gives them per collective.
void add(std::vector<CollectiveCost>* out, const MachineProfile& m, const CostSettings& s, const GridShape& g,
         std::string what, CommGroup grp, CollectiveKind kind, double message_bytes, double calls, Hiding hiding) {
  const long p = group_size(grp, g);
  if (p <= 1 || calls <= 0) return;
  const bool as_coded = s.variant == ModelVariant::kAsCoded;
  CollectiveCost c;
  c.what = std::move(what);
  c.group = grp;
  c.kind = kind;
  c.group_size = p;
  c.ip = group_ip(grp, g);
  c.ring = group_is_ring(grp, g);
  c.message_bytes = message_bytes;
  c.calls = calls;
  c.hiding = hiding;
  const double coef = kind == CollectiveKind::kAllReduce ? 2.0 : 1.0;
  const double f = d(p - 1) / d(p);
  if (!c.ring) {
    // no (ip, size) rule describes it: the two-level fallback, by where its ranks are
    const auto [inside, per_node] = group_spread(grp, g, m.gpus_per_node);
    c.inside_node = inside;
    c.bandwidth_gbs = m.spread_bandwidth_gbs(inside, per_node);
    double per_call = coef * f * message_bytes / 1e9 / c.bandwidth_gbs;
    if (s.latency) per_call += coef * d(p - 1) * m.spread_latency_s(inside) + m.sync_us * 1e-6;
    c.seconds = calls * per_call;
    out->push_back(std::move(c));
    return;
  }
  // this project's trainer issues every collective that can overlap non-blocking (and waits at once
  // without overlap): a calibrated profile times that form apart
  const bool async = s.implementation == Implementation::kAxonnCpp && hiding != Hiding::kNone;
  c.inside_node = m.inside_node(c.ip, p);
  c.bandwidth_gbs = as_coded ? m.bandwidth_gbs(c.ip, p) : m.bandwidth_gbs(kind, c.ip, p, async);
  const double unit = as_coded ? kGiB : 1e9;
  double per_call = coef * f * message_bytes / unit / c.bandwidth_gbs;
  if (!as_coded && s.latency) {
    // a calibrated profile's measured curve where it has one, else α per ring step
    if (auto t = m.measured_seconds(kind, c.ip, p, message_bytes, async))
      per_call = *t;
    else
      per_call += coef * d(p - 1) * m.latency_s(kind, c.ip, p, async);
    per_call += m.sync_us * 1e-6;  // the step's synchronisation cost, where the profile measured one
  }
  c.seconds = calls * per_call;
  out->push_back(std::move(c));
}

}  // namespace internal

using internal::add;
using internal::d;
using internal::group_size;

double total_seconds(const std::vector<CollectiveCost>& c) {
  double t = 0;
  for (const auto& x : c) t += x.seconds;
  return t;
}

std::vector<CollectiveCost> linear_layer_collectives(const MachineProfile& m, const LinearLayer& layer, double tokens,
                                                     long grad_accumulation, const GridShape& g,
                                                     const CostSettings& s) {
  AXONN_CHECK(grad_accumulation >= 1, "grad_accumulation ", grad_accumulation);
  const bool as_coded = s.variant == ModelVariant::kAsCoded;
  const double micro = d(grad_accumulation);
  const double T = tokens / d(g.gdata * g.gz);  // tokens per rank per step
  // A normal layer splits in-features over X, out-features over Y; a transposed one swaps them.
  const CommGroup in_grp = layer.transposed ? CommGroup::kY : CommGroup::kX;
  const CommGroup out_grp = layer.transposed ? CommGroup::kX : CommGroup::kY;
  const double g_in = d(group_size(in_grp, g)), g_out = d(group_size(out_grp, g));
  double din = d(layer.in_features), dout = d(layer.out_features);

  // Forward: Y_part = X·Ŵᵀ is partial over the in-features → all-reduce over the in-group of the
  // [T, dout/g_out] output. Backward: dX_part = dY·Ŵ is partial over the out-features →
  // all-reduce over the out-group of the [T, din/g_in] input gradient (spec §3.3, §3.4).
  double fwd_elems = T * dout / g_out;
  double bwd_elems = T * din / g_in;
  if (as_coded && layer.transposed) {
    // comm_model.py attaches the width multiplier K to the forward term of transposed layers too
    // (spec §5.2 "discrepancy"): it uses din in the forward and dout in the backward message.
    fwd_elems = T * din / g_out;
    bwd_elems = T * dout / g_in;
  }
  // SC24 factors in comm_model.py: forward collectives twice (activation recompute), two Z
  // all-gathers (forward + recompute; Ŵ kept for backward) and one reduce-scatter per micro-batch.
  const double fwd_repeats = as_coded ? 2.0 : (s.recompute ? 2.0 : 1.0);
  const double gathers = as_coded ? 2.0 : 1.0 + (s.recompute ? 1.0 : 0.0) + (s.regather_in_backward ? 1.0 : 0.0);
  const double block = din * dout / d(g.gx * g.gy);  // gathered weight block Ŵ, elements
  // comm_model.py: bf16 on the wire, fp32 data-parallel gradients; fixed in the as-coded variant.
  const double ab = as_coded ? 2.0 : s.comm_bytes, gb = as_coded ? 4.0 : s.grad_sync_bytes;

  std::vector<CollectiveCost> out;
  const std::string& n = layer.name;
  add(&out, m, s, g, n + " fwd all-reduce", in_grp, CollectiveKind::kAllReduce, fwd_elems / micro * ab,
      fwd_repeats * micro, Hiding::kNone);
  add(&out, m, s, g, n + " bwd all-reduce (dX)", out_grp, CollectiveKind::kAllReduce, bwd_elems / micro * ab, micro,
      Hiding::kUnderDataGrad);
  add(&out, m, s, g, n + " weight all-gather", CommGroup::kZ, CollectiveKind::kAllGather, block * ab, gathers * micro,
      Hiding::kUnderLayer);
  add(&out, m, s, g, n + " weight-grad reduce-scatter", CommGroup::kZ, CollectiveKind::kReduceScatter, block * ab,
      micro, Hiding::kUnderLayer);
  add(&out, m, s, g, n + " weight-grad all-reduce", CommGroup::kData, CollectiveKind::kAllReduce, block / d(g.gz) * gb,
      1.0, Hiding::kNone);
  return out;
}

namespace internal {

double exposed_linear(const std::vector<CollectiveCost>& collectives, double dw_s, double layer_s) {
  double blocking = 0, oar = 0, async = 0;
  for (const auto& c : collectives) {
    if (c.hiding == Hiding::kUnderDataGrad)
      oar += c.seconds;
    else if (c.hiding == Hiding::kUnderLayer)
      async += c.seconds;
    else
      blocking += c.seconds;
  }
  return blocking + std::max({0.0, oar - dw_s, oar + async - layer_s});
}

// Parameters per rank that are not Z-sharded tensor-parallel weights: norms and biases (normal
// layers' biases over Y, transposed ones' over X, norms on the h/Gx slice), from the model's tensors.
double small_params_per_rank(const Workload& w, const GridShape& g) {
  const model::ModelSpec spec = w.spec();
  const double L = d(w.model.layers()), H = d(w.model.hidden());
  double n = 0;
  for (const model::ParamSpec& p : spec.params) {
    const double layers = p.per_layer ? L : 1.0;
    if (p.role == model::Role::kNormWeight || p.role == model::Role::kNormBias) n += layers * H / d(g.gx);
    if (p.role == model::Role::kLinearBias) {
      const model::LinearSpec& l = spec.linears[static_cast<size_t>(p.linear)];
      n += layers * d(l.out) / d(l.transposed ? g.gx : g.gy);
    }
  }
  return n;
}
// The vocabulary tensors (token embedding, an untied LM head), vocab-parallel over X·Y and replicated
// over Z; GPT-2's position embedding replicated.
double embedding_params_per_rank(const Workload& w, const GridShape& g) {
  const model::ModelSpec spec = w.spec();
  const double H = d(w.model.hidden());
  double n = 0;
  for (const model::ParamSpec& p : spec.params) {
    if (p.role == model::Role::kVocab) n += d(w.model.vocab()) * H / d(g.gx * g.gy);
    if (p.role == model::Role::kPosition) n += d(w.position_rows()) * H;
  }
  return n;
}
double tp_params_per_rank(const Workload& w, const GridShape& g) {
  double p = 0;
  for (const auto& l : block_linear_layers(w.spec()))
    p += d(l.in_features) * d(l.out_features) / d(g.gx * g.gy * g.gz);
  return p * d(w.model.layers());
}
// Features of one block's activations on the two kinds of layout: the normal linears' outputs and the
// transposed ones' inputs are [T, ·/Gy] (replicated over X); GPT-2: 3H + 4H + H + 4H = 12H.
double intermediate_features(const Workload& w) {
  double f = 0;
  for (const auto& l : block_linear_layers(w.spec())) f += d(l.transposed ? l.in_features : l.out_features);
  return f;
}

}  // namespace internal

using internal::embedding_params_per_rank;
using internal::small_params_per_rank;
using internal::tp_params_per_rank;

std::vector<CollectiveCost> embedding_collectives(const MachineProfile& m, const Workload& w, const GridShape& g,
                                                  const CostSettings& s) {
  std::vector<CollectiveCost> out;
  if (s.variant == ModelVariant::kAsCoded || !s.embedding) return out;
  const double micro = d(w.grad_accumulation);
  const double T_mb = w.tokens() / d(g.gdata * g.gz) / micro;  // tokens per rank per micro-batch
  const double hidden_msg = T_mb * d(w.model.hidden()) * s.comm_bytes;
  // Megatron-AxoNN entry/exit (spec §3.4): vocab-parallel embedding over X·Y, then drop to h/Gx;
  // after the final norm gather h over X; vocab-parallel LM head and cross-entropy over X·Y.
  add(&out, m, s, g, "embedding fwd all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, hidden_msg, micro,
      Hiding::kNone);
  add(&out, m, s, g, "final hidden all-gather", CommGroup::kX, CollectiveKind::kAllGather, hidden_msg, micro,
      Hiding::kNone);
  add(&out, m, s, g, "cross-entropy max/sum all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, T_mb * 4.0,
      2 * micro, Hiding::kNone);
  add(&out, m, s, g, "LM head bwd all-reduce (dX)", CommGroup::kXY, CollectiveKind::kAllReduce, hidden_msg, micro,
      Hiding::kNone);
  add(&out, m, s, g, "embedding bwd all-gather", CommGroup::kX, CollectiveKind::kAllGather, hidden_msg, micro,
      Hiding::kNone);
  // Parameters replicated over Z: their gradients are summed over Z and data in one all-reduce.
  const double replicated = embedding_params_per_rank(w, g) + small_params_per_rank(w, g);
  add(&out, m, s, g, "embedding + norm/bias grad all-reduce", CommGroup::kZData, CollectiveKind::kAllReduce,
      replicated * s.grad_sync_bytes, 1.0, Hiding::kNone);
  return out;
}

MemoryEstimate estimate_memory(const Workload& w, const GridShape& g, const CostSettings& s) {
  const double H = d(w.model.hidden()), L = d(w.model.layers());
  const double T_mb = w.tokens() / d(g.gdata * g.gz) / d(w.grad_accumulation);
  const double params = tp_params_per_rank(w, g) + small_params_per_rank(w, g) + embedding_params_per_rank(w, g);
  const double Fy = internal::intermediate_features(w);
  MemoryEstimate mem;
  mem.weights = params * s.weight_bytes;
  mem.grads = params * s.grad_bytes;
  mem.optimizer = params * s.optimizer_bytes;
  // One layer's activations (bf16): residual-stream tensors [T, H/Gx] (two norm inputs, QKV and FC1
  // inputs) and intermediates [T, ·/Gy] (Q, K, V, attention output, FC1 output, GeLU output), plus
  // flash-attention softmax statistics (fp32 per head).
  const double layer_acts =
      s.comm_bytes * T_mb * (4 * H / d(g.gx) + Fy / d(g.gy)) + 4.0 * T_mb * d(w.model.heads()) / d(g.gy);
  // With recompute only each layer's input survives the forward; the layer being recomputed and its
  // gradients form the working set. Without, every layer's activations are kept.
  mem.activations = s.recompute ? L * s.comm_bytes * T_mb * H / d(g.gx) + 2 * layer_acts : (L + 1) * layer_acts;
  mem.logits = 4.0 * T_mb * d(w.model.vocab()) / d(g.gx * g.gy);
  double max_block = 0;
  for (const auto& l : block_linear_layers(w.spec()))
    max_block = std::max(max_block, d(l.in_features) * d(l.out_features) / d(g.gx * g.gy));
  // Ŵ in use + Ŵ prefetched (OAG) when sharded over Z, and one unreduced dW block.
  mem.gathered_weights = max_block * s.comm_bytes * (g.gz > 1 ? 3.0 : 1.0);
  return mem;
}

CostSettings settings_for(const MachineProfile& m) {
  CostSettings s;
  s.implementation = m.implementation;
  if (m.implementation == Implementation::kAxonnCpp) {
    s.recompute = false;
    s.regather_in_backward = true;
    s.overlap = false;
    s.comm_bytes = 4;
    s.grad_sync_bytes = 4;
    s.weight_bytes = 4;
    s.grad_bytes = 4;
    s.optimizer_bytes = 8;
  }
  return s;
}

CostSettings settings_for(const MachineProfile& m, bool overlap) {
  CostSettings s = settings_for(m);
  if (m.implementation == Implementation::kAxonnCpp) s.overlap = overlap;
  return s;
}

Estimate estimate(const MachineProfile& m, const Workload& w, const GridShape& g, const CostSettings& s) {
  w.validate();
  layout::GridOrder sorted = g.order;
  std::sort(sorted.begin(), sorted.end());
  AXONN_CHECK_ARG(sorted == layout::kAxonnGridOrder, "grid order ", g.str(), " is not a permutation of x, y, z");
  if (auto why = inadmissible_reason(w, g, 1)) throw InvalidArgument(*why);
  if (s.variant == ModelVariant::kCorrected && s.implementation == Implementation::kAxonnCpp)
    return internal::estimate_axonn_cpp(m, w, g, s);
  Estimate e;
  e.grid = g;
  e.micro_batches = w.grad_accumulation;
  e.recompute = s.recompute;
  const double L = d(w.model.layers()), H = d(w.model.hidden()), S = d(w.seq_len), V = d(w.model.vocab());
  const double A = d(w.model.config.attention_width()), Fy = internal::intermediate_features(w);
  const double T = w.tokens() / d(g.gdata * g.gz);  // tokens per rank per step
  const double fwd_passes = s.recompute ? 2.0 : 1.0;
  const double passes = fwd_passes + 2.0;  // + backward dX and dW
  const double rate = m.peak_tflops * 1e12 * m.gemm_efficiency;
  const double hbm = m.hbm_gbs * 1e9;

  // Linear layers: the collectives, the GEMM time they can hide behind, and what sticks out.
  double gemm_flops = 0;
  for (const auto& layer : block_linear_layers(w.spec())) {
    const auto coll = linear_layer_collectives(m, layer, w.tokens(), w.grad_accumulation, g, s);
    const double pass_flops = 2 * T * d(layer.in_features) * d(layer.out_features) / d(g.gx * g.gy);
    gemm_flops += L * passes * pass_flops;
    for (const auto& c : coll) {
      switch (c.group) {
        case CommGroup::kX:
          e.comm.x += L * c.seconds;
          break;
        case CommGroup::kY:
          e.comm.y += L * c.seconds;
          break;
        case CommGroup::kZ:
          e.comm.z += L * c.seconds;
          break;
        default:
          e.comm.data += L * c.seconds;
          break;
      }
    }
    // OAR hides under this layer's dW GEMM; OAG/ORS (and OAR) under all of its GEMMs.
    const double dw_s = pass_flops / rate, layer_s = passes * pass_flops / rate;
    e.exposed_comm_s += L * (s.overlap ? internal::exposed_linear(coll, dw_s, layer_s) : total_seconds(coll));
  }
  const auto emb = embedding_collectives(m, w, g, s);
  e.comm.embedding = total_seconds(emb);
  e.exposed_comm_s += e.comm.embedding;
  e.comm_s = e.comm.total();

  // Compute. Attention core (QKᵀ and AV, 4·S·A FLOPs per token forward, Narayanan's count, A = the
  // attention's width, H for GPT-2): heads over Y, replicated over X. LM head: vocab-parallel over X·Y,
  // forward + backward.
  gemm_flops += L * passes * 4 * T * S * A / d(g.gy);
  gemm_flops += 3 * 2 * T * H * V / d(g.gx * g.gy);
  e.gemm_s = gemm_flops / rate;
  // Memory-bound kernels, bf16 elements read + written per token and layer in the forward: on the
  // h/Gx residual stream 2 norms (4), 2 residual adds (6), 2 bias adds (4); on the /Gy intermediates
  // (GPT-2: QKV and FC1 bias adds 14, GeLU 8, for its 12H features: 22/12 per feature). Backward ≈ 2×
  // forward. Cross-entropy reads/writes the fp32 logits; the optimizer streams ~32 bytes per local
  // parameter (fp32 grad, master, m, v, bf16 copy).
  const double per_layer_bytes = s.comm_bytes * T * (14 * H / d(g.gx) + 22 * Fy / 12 / d(g.gy));
  double mb_bytes = L * passes * per_layer_bytes;
  mb_bytes += 3 * 4.0 * T * V / d(g.gx * g.gy);
  mb_bytes += 32.0 * (tp_params_per_rank(w, g) + small_params_per_rank(w, g) + embedding_params_per_rank(w, g));
  e.memory_bound_s = mb_bytes / hbm;
  e.compute_s = e.gemm_s + e.memory_bound_s;
  e.total_s = e.compute_s + e.exposed_comm_s;

  e.memory = estimate_memory(w, g, s);
  e.fits = e.memory.total_gib() <= s.memory_headroom * m.memory_gib;
  e.model_flops = gpt_model_flops(w);
  e.mfu = e.model_flops / (e.total_s * d(g.size()) * m.peak_tflops * 1e12);
  return e;
}

}  // namespace axonn::planner
