// The step of this project's CPU implementation (Implementation::kAxonnCpp), collective by
// collective as src/model/gpt.cpp and src/parallel/linear.cpp issue them (docs/parallelism.md,
// "The collectives of one step"), GEMM by GEMM as src/kernels/cpu calls sgemm. Derivation and the
// validation on this machine: docs/perf-model.md §10 and §11.
#include <algorithm>

#include "axonn/planner/cost_model.hpp"
#include "cost_internal.hpp"

namespace axonn::planner::internal {

namespace {

// Local elements of the parameter tensors as gpt.cpp lays them out (docs/parallelism.md, Layouts).
struct LocalParams {
  double replicated_over_z = 0;  // every tensor but the four weight shards: synced over Z, then data
  double shards = 0;             // the weight shards: synced over data
  double total() const { return replicated_over_z + shards; }
};

// sync_gradients issues one all-reduce per tensor: these are the 12 replicated tensors, each with
// its local element count.
std::vector<double> replicated_tensors(const Workload& w, const GridShape& g) {
  const double L = d(w.model.layers), H = d(w.model.hidden), V = d(w.model.vocab), P = d(w.position_rows());
  const double Hx = H / d(g.gx), Hy = H / d(g.gy);
  return {
      V * H / d(g.gx * g.gy),  // wte: vocabulary rows over X·Y, all channels
      P * Hx,                  // wpe
      L * Hx, L * Hx,          // ln1 w, b
      L * 3 * Hy,              // qkv bias (output over Y)
      L * Hx,                  // attproj bias (transposed: output over X)
      L * Hx, L * Hx,          // ln2 w, b
      L * 4 * Hy,              // fc bias
      L * Hx,                  // fcproj bias
      Hx, Hx,                  // lnf w, b
  };
}

LocalParams local_params(const Workload& w, const GridShape& g) {
  LocalParams p;
  for (double n : replicated_tensors(w, g)) p.replicated_over_z += n;
  p.shards = tp_params_per_rank(w, g);
  return p;
}

void tally(Estimate* e, const CollectiveCost& c, double times) {
  const double t = times * c.seconds;
  switch (c.group) {
    case CommGroup::kX:
      e->comm.x += t;
      break;
    case CommGroup::kY:
      e->comm.y += t;
      break;
    case CommGroup::kZ:
      e->comm.z += t;
      break;
    case CommGroup::kData:
      e->comm.data += t;
      break;
    default:
      e->comm.embedding += t;
      break;
  }
}

}  // namespace

Estimate estimate_axonn_cpp(const MachineProfile& m, const Workload& w, const GridShape& g, const CostSettings& s) {
  Estimate e;
  e.grid = g;
  const double L = d(w.model.layers), H = d(w.model.hidden), S = d(w.seq_len), V = d(w.model.vocab);
  const double heads = d(w.model.heads);
  const double micro = d(w.grad_accumulation);
  const double N = w.tokens() / d(g.gdata * g.gz) / micro;  // tokens per rank per micro-batch
  const double gxy = d(g.gx * g.gy);
  const double b = s.comm_bytes, gb = s.grad_sync_bytes;
  const double fwd = s.recompute ? 2.0 : 1.0;  // forward passes (recompute repeats it)
  const double gathers = fwd + (s.regather_in_backward ? 1.0 : 0.0);

  // --- communication, in the order gpt.cpp issues it -------------------------------------------
  // One layer (×L): two LayerNorms, each two all-reduces of N row sums over X forward (mean, then
  // variance) and one of 2N backward; then the four tensor-parallel linears (linear.cpp).
  std::vector<CollectiveCost> layer;
  add(&layer, m, s, g, "LayerNorm fwd statistics all-reduce", CommGroup::kX, CollectiveKind::kAllReduce, N * 4.0,
      2 * 2 * fwd * micro, Hiding::kNone);
  add(&layer, m, s, g, "LayerNorm bwd all-reduce", CommGroup::kX, CollectiveKind::kAllReduce, 2 * N * 4.0, 2 * micro,
      Hiding::kNone);
  double gemm_flops = 0, gemm_calls = 0;
  double layer_exposed = total_seconds(layer);  // the LayerNorm statistics block; each linear adds its own
  for (const auto& l : block_linear_layers(w.model.hidden)) {
    const size_t first = layer.size();
    const CommGroup in_grp = l.transposed ? CommGroup::kY : CommGroup::kX;
    const CommGroup out_grp = l.transposed ? CommGroup::kX : CommGroup::kY;
    const double din = d(l.in_features), dout = d(l.out_features);
    const double g_in = d(group_size(in_grp, g)), g_out = d(group_size(out_grp, g));
    const double block = din * dout / gxy;
    // with --overlap (docs/overlap.md): OAG prefetches the gathers, ORS retires the reduce-scatters
    // later, OAR waits for dX after the dW GEMM; the forward all-reduces block
    add(&layer, m, s, g, l.name + " weight all-gather", CommGroup::kZ, CollectiveKind::kAllGather, block * b,
        gathers * micro, Hiding::kUnderLayer);
    add(&layer, m, s, g, l.name + " fwd all-reduce", in_grp, CollectiveKind::kAllReduce, N * dout / g_out * b,
        fwd * micro, Hiding::kNone);
    add(&layer, m, s, g, l.name + " bwd all-reduce (dX)", out_grp, CollectiveKind::kAllReduce, N * din / g_in * b,
        micro, Hiding::kUnderDataGrad);
    add(&layer, m, s, g, l.name + " weight-grad reduce-scatter", CommGroup::kZ, CollectiveKind::kReduceScatter,
        block * b, micro, Hiding::kUnderLayer);
    // GEMMs: forward (per forward pass), dX and dW, one sgemm call each.
    const double pass_s = micro * (2 * N * din * dout / gxy / m.gemm_flops_per_s() + m.gemm_call_us * 1e-6);
    const std::vector<CollectiveCost> own(layer.begin() + static_cast<long>(first), layer.end());
    layer_exposed += s.overlap ? exposed_linear(own, pass_s, (fwd + 2) * pass_s) : total_seconds(own);
    gemm_flops += L * micro * (fwd + 2) * 2 * N * din * dout / gxy;
    gemm_calls += L * micro * (fwd + 2);
  }
  for (const auto& c : layer) tally(&e, c, L);

  // Entry, exit, loss, gradient sync, gradient norm (once per step or per micro-batch).
  std::vector<CollectiveCost> step;
  const double hidden_msg = N * H * b;  // [N, C] rows, all channels
  add(&step, m, s, g, "embedding fwd all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, hidden_msg, fwd * micro,
      Hiding::kNone);
  add(&step, m, s, g, "final LayerNorm fwd all-reduce", CommGroup::kX, CollectiveKind::kAllReduce, N * 4.0,
      2 * fwd * micro, Hiding::kNone);
  add(&step, m, s, g, "LM head input all-gather", CommGroup::kX, CollectiveKind::kAllGather, hidden_msg, fwd * micro,
      Hiding::kNone);
  add(&step, m, s, g, "cross-entropy row-max all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, N * 4.0,
      fwd * micro, Hiding::kNone);
  add(&step, m, s, g, "cross-entropy sum/target all-reduce", CommGroup::kXY, CollectiveKind::kAllReduce, 2 * N * 4.0,
      fwd * micro, Hiding::kNone);
  add(&step, m, s, g, "loss all-reduce over Z", CommGroup::kZ, CollectiveKind::kAllReduce, 4.0, micro, Hiding::kNone);
  add(&step, m, s, g, "loss all-reduce over data", CommGroup::kData, CollectiveKind::kAllReduce, 4.0, micro,
      Hiding::kNone);
  add(&step, m, s, g, "LM head bwd all-reduce (d lnf)", CommGroup::kXY, CollectiveKind::kAllReduce, hidden_msg, micro,
      Hiding::kNone);
  add(&step, m, s, g, "final LayerNorm bwd all-reduce", CommGroup::kX, CollectiveKind::kAllReduce, 2 * N * 4.0, micro,
      Hiding::kNone);
  add(&step, m, s, g, "embedding bwd all-gather", CommGroup::kX, CollectiveKind::kAllGather, hidden_msg, micro,
      Hiding::kNone);
  // sync_gradients: one all-reduce per tensor, over Z then data for the replicated ones, over data
  // for the four weight shards (already summed over Z by the reduce-scatters).
  // (with --overlap dp these run in the last micro-batch's backward, each once its gradient is final)
  for (double n : replicated_tensors(w, g)) {
    add(&step, m, s, g, "replicated grad all-reduce over Z", CommGroup::kZ, CollectiveKind::kAllReduce, n * gb, 1.0,
        Hiding::kUnderBackward);
    add(&step, m, s, g, "replicated grad all-reduce over data", CommGroup::kData, CollectiveKind::kAllReduce, n * gb,
        1.0, Hiding::kUnderBackward);
  }
  for (const auto& l : block_linear_layers(w.model.hidden))
    add(&step, m, s, g, l.name + " shard grad all-reduce over data", CommGroup::kData, CollectiveKind::kAllReduce,
        L * d(l.in_features) * d(l.out_features) / d(g.gx * g.gy * g.gz) * gb, 1.0, Hiding::kUnderBackward);
  add(&step, m, s, g, "gradient-norm all-reduce", CommGroup::kXYZ, CollectiveKind::kAllReduce, 2 * 4.0, 1.0,
      Hiding::kNone);
  for (const auto& c : step) tally(&e, c, 1.0);
  e.comm_s = e.comm.total();
  double step_blocking = 0, dp = 0;
  for (const auto& c : step) (s.overlap && c.hiding == Hiding::kUnderBackward ? dp : step_blocking) += c.seconds;
  // the gradient sums hide under the backward of the layers after the first one to finish (dX and dW
  // GEMMs of the other L-1 layers, of the last micro-batch)
  double linear_pass_s = 0;
  for (const auto& l : block_linear_layers(w.model.hidden))
    linear_pass_s += 2 * N * d(l.in_features) * d(l.out_features) / gxy / m.gemm_flops_per_s();
  const double backward_s = (L - 1) * 2 * linear_pass_s;
  e.exposed_comm_s = L * layer_exposed + step_blocking + std::max(0.0, dp - backward_s);

  // --- compute --------------------------------------------------------------------------------
  // Attention core per (sequence, local head): forward q·kᵀ and att·v, backward four GEMMs of T×T×hs;
  // heads over Y, replicated over X. LM head: vocabulary rows over X·Y, forward + dX + dW.
  const double seqs = N / S;  // sequences per rank per micro-batch
  gemm_flops += L * micro * (fwd * 4 + 8) * N * S * H / d(g.gy);
  gemm_calls += L * micro * (fwd * 2 + 4) * seqs * heads / d(g.gy);
  gemm_flops += micro * (fwd + 2) * 2 * N * H * V / gxy;
  gemm_calls += micro * (fwd + 2);
  e.gemm_s = gemm_flops / m.gemm_flops_per_s() + gemm_calls * m.gemm_call_us * 1e-6;

  // Memory-bound kernels, fp32 element accesses (reads + writes), replicated work included:
  //  residual stream [N, H/Gx] (replicated over Y): 2 LayerNorms (4 accesses each) and 2 residual
  //    adds (3) forward, ≈ 2× backward, 2 memsets;
  //  intermediates [N, ·H/Gy] (replicated over X): bias adds of QKV and FC (7 H), GeLU (8 H) forward,
  //    ≈ 2× backward, memsets of the gradients (9 H);
  //  attention scores [T, T] per sequence and local head: softmax 3 forward, 6 backward;
  //  entry/exit: [N, H] embedding rows, gathers and their re-layout (≈ 8 passes); the logits
  //    [N, V/(Gx·Gy)]: softmax + cross-entropy 3 forward, 2 backward;
  //  per local parameter: AdamW 7 (param, grad, m, v), zero_grad 1, gradient norm 1; per weight
  //    shard element with Gz > 1: the reduce-scatter's accumulation 3 and the dW block memset Gz.
  const double acc_x = (fwd * 14 + 28 + 2) * H / d(g.gx);
  const double acc_y = (fwd * 15 + 30 + 9) * H / d(g.gy);
  const double acc_att = (fwd * 3 + 6) * S * heads / d(g.gy);
  double accesses = L * micro * N * (acc_x + acc_y + acc_att);
  accesses += micro * N * (8 * H + (fwd * 3 + 2) * V / gxy);
  const LocalParams p = local_params(w, g);
  accesses += 9 * p.total();
  if (g.gz > 1) accesses += micro * p.shards * (3 + d(g.gz));
  e.memory_bound_s = accesses * 4.0 / (m.hbm_gbs * 1e9);
  e.compute_s = e.gemm_s + e.memory_bound_s;
  e.total_s = e.compute_s + e.exposed_comm_s;

  // --- memory per rank (fp32 everywhere, every layer's activations kept) ------------------------
  MemoryEstimate& mem = e.memory;
  mem.weights = p.total() * s.weight_bytes;
  mem.grads = p.total() * s.grad_bytes;
  mem.optimizer = p.total() * s.optimizer_bytes;
  // One layer: ln1, ln2, attproj, residual2, fcproj, residual3 on [N, H/Gx]; qkv, atty, fch,
  // fch_gelu on 12·H/Gy; the attention scores; LayerNorm mean and rstd. Plus the embedding
  // output, lnf and its gathered copy, the backward's scratch (≈ 2 layers' gradients).
  const double layer_acts = N * (6 * H / d(g.gx) + 12 * H / d(g.gy) + S * heads / d(g.gy) + 4);
  mem.activations = 4.0 * ((L + 2) * layer_acts + N * (2 * H / d(g.gx) + 3 * H));
  mem.logits = 4.0 * N * V / gxy;
  double max_block = 0;
  for (const auto& l : block_linear_layers(w.model.hidden))
    max_block = std::max(max_block, d(l.in_features) * d(l.out_features) / gxy);
  mem.gathered_weights = g.gz > 1 ? 2 * max_block * 4.0 : 0.0;  // gathered Ŵ and the dW block
  e.fits = mem.total_gib() <= s.memory_headroom * m.memory_gib;
  e.model_flops = gpt_model_flops(w);
  e.mfu = e.model_flops / (e.total_s * d(g.size()) * m.peak_tflops * 1e12);
  return e;
}

}  // namespace axonn::planner::internal
