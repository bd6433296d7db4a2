// The step of this project's CPU implementation (Implementation::kAxonnCpp): its collectives exactly as
// the model issues them, derived from the model's tensor list (planner/step_collectives.hpp; checked
// against a traced step by tests/mpi/planner), and its GEMMs as src/kernels/cpu calls sgemm.
// Derivation and the validation on this machine: docs/perf-model.md §10 and §11.
#include <algorithm>

#include "axonn/planner/cost_model.hpp"
#include "axonn/planner/step_collectives.hpp"
#include "cost_internal.hpp"

namespace axonn::planner::internal {

namespace {

void tally(Estimate* e, const CollectiveCost& c) {
  switch (c.group) {
    case CommGroup::kX:
      e->comm.x += c.seconds;
      break;
    case CommGroup::kY:
      e->comm.y += c.seconds;
      break;
    case CommGroup::kZ:
      e->comm.z += c.seconds;
      break;
    case CommGroup::kData:
      e->comm.data += c.seconds;
      break;
    default:
      e->comm.embedding += c.seconds;
      break;
  }
}

}  // namespace

Estimate estimate_axonn_cpp(const MachineProfile& m, const Workload& w, const GridShape& g, const CostSettings& s) {
  Estimate e;
  e.grid = g;
  e.micro_batches = w.grad_accumulation;
  e.recompute = s.recompute;
  const model::ModelSpec spec = w.spec();
  const double L = d(w.model.layers()), H = d(w.model.hidden()), S = d(w.seq_len), V = d(w.model.vocab());
  const double heads = d(w.model.heads()), A = d(spec.config.attention_width());
  const double micro = d(w.grad_accumulation);
  const double N = w.tokens() / d(g.gdata * g.gz) / micro;  // tokens per rank per micro-batch
  const double gxy = d(g.gx * g.gy);
  const double fwd = s.recompute ? 2.0 : 1.0;  // forward passes (recompute repeats it)

  // --- communication: every collective the model issues --------------------------------------
  StepShape shape;
  shape.tokens = N;
  shape.micro_batches = w.grad_accumulation;
  shape.recompute = s.recompute;
  shape.activation_bytes = s.comm_bytes;
  const std::vector<model::LinearSpec>& linears = spec.linears;
  std::vector<std::vector<CollectiveCost>> of_linear(linears.size());  // each linear's own
  double blocking = 0, grad_sums = 0;
  for (const ModelCollective& c : model_collectives(spec, g, shape)) {
    std::vector<CollectiveCost> one;  // priced in the form the trainer issues it (non-blocking if it can hide)
    add(&one, m, s, g, c.what, c.group, c.kind, c.message_bytes, c.calls, c.hiding);
    for (const CollectiveCost& cost : one) {
      tally(&e, cost);
      // of a collective that can hide, the share computation covers (the profile's overlap share where
      // it runs: on a CPU, copies through shared memory take the GEMMs' cores) hides; the rest blocks
      const bool under_backward = c.hiding == Hiding::kUnderBackward;
      const bool under_linear = !under_backward && c.linear >= 0 && c.hiding != Hiding::kNone;
      const double share = under_backward || under_linear ? m.overlap_share(cost.inside_node) : 0.0;
      blocking += (1.0 - share) * cost.seconds;
      if (under_backward) grad_sums += share * cost.seconds;
      if (under_linear) {
        CollectiveCost hideable = cost;
        hideable.seconds *= share;
        of_linear[static_cast<size_t>(c.linear)].push_back(std::move(hideable));
      }
    }
  }
  e.comm_s = e.comm.total();

  // --- compute --------------------------------------------------------------------------------
  // One block in one micro-batch. GEMMs per linear: forward (per forward pass), dX and dW, one sgemm
  // call each. Attention core per (sequence, local head): forward q·kᵀ and att·v, backward four GEMMs
  // of T×T×hs; heads over Y, replicated over X.
  double block_flops = 0, block_calls = 0;
  for (const auto& l : block_linear_layers(spec)) {
    const double din = d(l.in_features), dout = d(l.out_features);
    block_flops += (fwd + 2) * 2 * N * din * dout / gxy;
    block_calls += fwd + 2;
  }
  const double seqs = N / S;  // sequences per rank per micro-batch
  block_flops += (fwd * 4 + 8) * N * S * A / d(g.gy);
  block_calls += (fwd * 2 + 4) * seqs * heads / d(g.gy);
  // LM head: vocabulary rows over X·Y, forward + dX + dW.
  const double gemm_flops = L * micro * block_flops + micro * (fwd + 2) * 2 * N * H * V / gxy;
  const double gemm_calls = L * micro * block_calls + micro * (fwd + 2);
  auto gemm_seconds = [&](double flops, double calls) {
    return flops / m.gemm_flops_per_s() + calls * m.gemm_call_us * 1e-6;
  };
  e.gemm_s = gemm_seconds(gemm_flops, gemm_calls);

  // Memory-bound kernels, fp32 element accesses (reads + writes), replicated work included:
  //  residual stream [N, H/Gx] (replicated over Y): 2 norms (4 accesses each) and 2 residual
  //    adds (3) forward, ≈ 2× backward, 2 memsets;
  //  intermediates [N, ·/Gy] (replicated over X), Fy features (GPT-2: 12H): bias adds of QKV and FC
  //    (7 H), GeLU (8 H) forward, ≈ 2× backward, memsets of the gradients (9 H), i.e. 39/12 per feature;
  //  attention scores [T, T] per sequence and local head: softmax 3 forward, 6 backward;
  //  entry/exit: [N, H] embedding rows, gathers and their re-layout (≈ 8 passes); the logits
  //    [N, V/(Gx·Gy)]: softmax + cross-entropy 3 forward, 2 backward;
  //  per local parameter: AdamW 7 (param, grad, m, v), zero_grad 1, gradient norm 1; per weight
  //    shard element with Gz > 1: the reduce-scatter's accumulation 3 and the dW block memset Gz.
  const double Fy = intermediate_features(w);
  const double acc_x = (fwd * 14 + 28 + 2) * H / d(g.gx);
  const double acc_y = (fwd * 15 + 30 + 9) * (Fy / 12) / d(g.gy);
  const double acc_att = (fwd * 3 + 6) * S * heads / d(g.gy);
  const double block_accesses = N * (acc_x + acc_y + acc_att);
  double accesses = L * micro * block_accesses;
  accesses += micro * N * (8 * H + (fwd * 3 + 2) * V / gxy);
  // the local parameters as the model holds them, and of those the Z-sharded linear weights
  double params = 0, shards = 0;
  const std::vector<double> local = local_elements(spec, g);
  for (int t = 0; t < static_cast<int>(spec.params.size()); t++) {
    const double n = local[static_cast<size_t>(t)];
    params += n;
    if (spec.params[static_cast<size_t>(t)].role == model::Role::kLinearWeight) shards += n;
  }
  accesses += 9 * params;
  if (g.gz > 1) accesses += micro * shards * (3 + d(g.gz));
  auto memory_seconds = [&](double fp32_accesses) { return fp32_accesses * 4.0 / (m.hbm_gbs * 1e9); };
  e.memory_bound_s = memory_seconds(accesses);

  // --- what overlap leaves exposed --------------------------------------------------------------
  // With --overlap (docs/overlap.md): each linear's OAR waits for dX after its dW GEMM, OAG prefetches
  // its weight gathers and ORS retires its reduce-scatters under its GEMMs (exposed_linear); the
  // gradient sums run under the rest of the last micro-batch's backward: the other L-1 blocks'
  // backward work (with recompute, their forward again too), a block's (fwd + 1)/(fwd + 2) of it
  // since its backward is about twice its forward.
  // All the calls of a step at once: each linear's L layers' collectives against its L layers' GEMMs.
  double exposed = blocking;
  for (size_t k = 0; k < linears.size(); k++) {
    const double flops = 2 * N * d(linears[k].in) * d(linears[k].out) / gxy;
    const double pass_s = L * micro * gemm_seconds(flops, 1);
    exposed += s.overlap ? exposed_linear(of_linear[k], pass_s, (fwd + 2) * pass_s) : total_seconds(of_linear[k]);
  }
  const double block_s = gemm_seconds(block_flops, block_calls) + memory_seconds(block_accesses);
  const double backward_s = (L - 1) * (fwd + 1) / (fwd + 2) * block_s;
  exposed += s.overlap ? std::max(0.0, grad_sums - backward_s) : grad_sums;
  e.exposed_comm_s = exposed;
  e.compute_s = e.gemm_s + e.memory_bound_s;
  e.total_s = e.compute_s + e.exposed_comm_s;

  // --- memory per rank (fp32 everywhere, every layer's activations kept) ------------------------
  MemoryEstimate& mem = e.memory;
  mem.weights = params * s.weight_bytes;
  mem.grads = params * s.grad_bytes;
  mem.optimizer = params * s.optimizer_bytes;
  // One layer: the norms' outputs, the projections' outputs and the residual sums on [N, H/Gx]; the
  // intermediates on Fy/Gy; the attention scores; the norms' statistics. Plus the embedding output,
  // lnf and its gathered copy, the backward's scratch (≈ 2 layers' gradients).
  const double layer_acts = N * (6 * H / d(g.gx) + Fy / d(g.gy) + S * heads / d(g.gy) + 4);
  mem.activations = 4.0 * ((L + 2) * layer_acts + N * (2 * H / d(g.gx) + 3 * H));
  mem.logits = 4.0 * N * V / gxy;
  double max_block = 0;
  for (const auto& l : block_linear_layers(spec))
    max_block = std::max(max_block, d(l.in_features) * d(l.out_features) / gxy);
  mem.gathered_weights = g.gz > 1 ? 2 * max_block * 4.0 : 0.0;  // gathered Ŵ and the dW block
  e.fits = mem.total_gib() <= s.memory_headroom * m.memory_gib;
  e.model_flops = gpt_model_flops(w);
  e.mfu = e.model_flops / (e.total_s * d(g.size()) * m.peak_tflops * 1e12);
  return e;
}

}  // namespace axonn::planner::internal
