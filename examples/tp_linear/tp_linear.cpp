// tp_linear — axonn's tensor-parallel linear layer (parallel::TpLinear) inside our own small model, on a
// 4D grid of MPI ranks, checked against plain matrix products of the whole tensors.
//
//   mpirun -n 4 tp_linear [GRID]          (default 2,2,1,1: Gx,Gy,Gz,Gdata)
//
// Our model: y = relu(x W1^T + b1) W2^T + b2, with x [M, 32], W1 [64, 32], W2 [16, 64]. Layer 1 is a
// normal TpLinear (input features over X, output features over Y), layer 2 a transposed one (input over
// Y, output over X): layer 1's output is exactly layer 2's input, so our ReLU runs on each rank's block
// with no communication. Tokens are split over Z and data; weights are sharded over Z (ZeRO-3). The
// program builds the full tensors on every rank from one seed, runs the layers on its pieces, and checks
// the output, the input gradient and both layers' weight and bias gradients against the single-rank
// computation. Exits 1 if any piece differs.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/parallel/linear.hpp"

using namespace axonn;
using Vec = std::vector<float>;

// out[m, n] = in[m, k] W[n, k]^T + b[n], the plain way (our single-rank reference)
Vec matmul(const Vec& in, const Vec& w, const Vec& b, int m, int k, int n) {
  Vec out(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = b[j];
      for (int p = 0; p < k; p++) s += static_cast<double>(in[i * k + p]) * w[j * k + p];
      out[i * n + j] = static_cast<float>(s);
    }
  return out;
}
Vec random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  Vec v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// The largest difference between this rank's piece and the full tensor at the same places:
// piece[r, c] against full[row0 + r, col(c)].
template <class Col>
double max_diff(const Vec& piece, const Vec& full, int width, int row0, int cols, Col col) {
  double d = 0;
  for (size_t e = 0; e < piece.size(); e++)
    d = std::max(d, std::abs(double(piece[e]) - full[(row0 + e / cols) * width + col(int(e % cols))]));
  return d;
}

int main(int argc, char** argv) {
  comm::Runtime mpi(&argc, &argv);
  try {
    auto world = comm::world();
    const parallel::GridShape shape = parallel::parse_grid(argc > 1 ? argv[1] : "2,2,1,1", world->size());
    parallel::Grid grid(shape, world);  // collective: every group's communicator
    const int M = 16, IN = 32, HID = 64, OUT = 16;

    // the whole model and data, the same on every rank
    const Vec x = random(M * IN, 1), w1 = random(HID * IN, 2), b1 = random(HID, 3), w2 = random(OUT * HID, 4),
              b2 = random(OUT, 5), dy = random(M * OUT, 6);
    // single rank: forward, then backward of the loss whose output gradient is dy
    Vec h = matmul(x, w1, b1, M, IN, HID);
    for (float& v : h) v = std::max(v, 0.0f);
    const Vec y = matmul(h, w2, b2, M, HID, OUT);
    Vec dh(M * HID, 0.0f), dx(M * IN, 0.0f), dw1(HID * IN, 0.0f), db1(HID, 0.0f), dw2(OUT * HID, 0.0f), db2(OUT, 0.0f);
    for (int i = 0; i < M; i++)
      for (int o = 0; o < OUT; o++) {
        db2[o] += dy[i * OUT + o];
        for (int j = 0; j < HID; j++) {
          dh[i * HID + j] += dy[i * OUT + o] * w2[o * HID + j];
          dw2[o * HID + j] += dy[i * OUT + o] * h[i * HID + j];
        }
      }
    for (int i = 0; i < M; i++)
      for (int j = 0; j < HID; j++) {
        const float g = h[i * HID + j] > 0 ? dh[i * HID + j] : 0.0f;
        db1[j] += g;
        for (int p = 0; p < IN; p++) {
          dx[i * IN + p] += g * w1[j * IN + p];
          dw1[j * IN + p] += g * x[i * IN + p];
        }
      }

    // the grid: this rank's tokens, its blocks of features, its shards of the weights
    parallel::TpLinear l1(grid, {.in = IN, .out = HID}, "fc1"), l2(grid, {.in = HID, .out = OUT, .transposed = true}, "fc2");
    const parallel::TpLinearLayout &L1 = l1.layout(), &L2 = l2.layout();
    const parallel::GridCoords& at = grid.coords();
    const int m = M / (shape.gz * shape.gdata), row0 = (at.d * shape.gz + at.z) * m;
    auto in1 = [&](int c) { return L1.in_block * L1.in_local + c; };
    auto out1 = [&](int c) { return static_cast<int>(L1.out_row(c)); };
    auto out2 = [&](int c) { return static_cast<int>(L2.out_row(c)); };
    Vec x_loc, dy_loc, w1_shard, w2_shard, b1_loc, b2_loc;
    for (int r = 0; r < m; r++) {
      for (int c = 0; c < L1.in_local; c++) x_loc.push_back(x[(row0 + r) * IN + in1(c)]);
      for (int c = 0; c < L2.out_local; c++) dy_loc.push_back(dy[(row0 + r) * OUT + out2(c)]);
    }
    for (int64_t j = 0; j < L1.shard_size; j++) w1_shard.push_back(w1[L1.weight_index(L1.shard_offset + j)]);
    for (int64_t j = 0; j < L2.shard_size; j++) w2_shard.push_back(w2[L2.weight_index(L2.shard_offset + j)]);
    for (int r = 0; r < L1.out_local; r++) b1_loc.push_back(b1[out1(r)]);
    for (int r = 0; r < L2.out_local; r++) b2_loc.push_back(b2[out2(r)]);

    const kernels::Ops& ops = kernels::ops_for(kernels::Backend::kCpu);
    parallel::Timeline tl;                               // no profiler, no trace: plain calls
    parallel::ReduceScatterQueue dw_sums(tl, 2, false);  // the weight gradients' reduce-scatters over Z
    const parallel::LinearRun run{ops, tl, &dw_sums};
    Vec gathered(std::max(L1.block_size, L2.block_size));
    Vec h_loc(m * L1.out_local), y_loc(m * L2.out_local);
    l1.forward(h_loc.data(), x_loc.data(), l1.gather_weight(w1_shard.data(), gathered.data(), tl), b1_loc.data(), m, run);
    for (float& v : h_loc) v = std::max(v, 0.0f);  // our own layer, on this rank's block
    l2.forward(y_loc.data(), h_loc.data(), l2.gather_weight(w2_shard.data(), gathered.data(), tl), b2_loc.data(), m, run);

    Vec dh_loc(h_loc.size(), 0.0f), dx_loc(x_loc.size(), 0.0f), dw1_shard(L1.shard_size, 0.0f), db1_loc(L1.out_local, 0.0f),
        dw2_shard(L2.shard_size, 0.0f), db2_loc(L2.out_local, 0.0f);
    l2.backward(dh_loc.data(), dw2_shard.data(), db2_loc.data(), dy_loc.data(), h_loc.data(),
                l2.gather_weight(w2_shard.data(), gathered.data(), tl), m, 2, run);
    for (size_t e = 0; e < dh_loc.size(); e++) dh_loc[e] = h_loc[e] > 0 ? dh_loc[e] : 0.0f;
    l1.backward(dx_loc.data(), dw1_shard.data(), db1_loc.data(), dh_loc.data(), x_loc.data(),
                l1.gather_weight(w1_shard.data(), gathered.data(), tl), m, 1, run);
    dw_sums.drain();
    // each rank saw its own tokens: sum the weight shards over data, the biases over Z and data (what
    // model::Gpt::sync_gradients does for its layers)
    for (Vec* g : {&dw1_shard, &dw2_shard}) grid.data().all_reduce(g->data(), g->size(), DType::kF32);
    for (Vec* g : {&db1_loc, &db2_loc}) grid.zdata().all_reduce(g->data(), g->size(), DType::kF32);

    auto shard_diff = [](const Vec& shard, const Vec& full, const parallel::TpLinearLayout& L) {
      double d = 0;
      for (int64_t j = 0; j < L.shard_size; j++)
        d = std::max(d, std::abs(double(shard[j]) - full[L.weight_index(L.shard_offset + j)]));
      return d;
    };
    const double diffs[] = {
        max_diff(y_loc, y, OUT, row0, L2.out_local, out2),  max_diff(dx_loc, dx, IN, row0, L1.in_local, in1),
        shard_diff(dw1_shard, dw1, L1),                     shard_diff(dw2_shard, dw2, L2),
        max_diff(db1_loc, db1, HID, 0, L1.out_local, out1), max_diff(db2_loc, db2, OUT, 0, L2.out_local, out2)};
    float worst = 0;
    for (double d : diffs) worst = std::max(worst, static_cast<float>(d));
    grid.world().all_reduce(&worst, 1, DType::kF32, comm::ReduceOp::kMax);  // the worst rank's
    const bool match = worst < 1e-4f;  // float sums in another order than the reference's double ones
    if (mpi.world_rank() == 0)
      std::printf("grid %s: y, dx, dW1, dW2, db1, db2 %s one rank's matmuls: max |diff| %.2e\n", shape.str().c_str(),
                  match ? "match" : "DO NOT MATCH", static_cast<double>(worst));
    return match ? 0 : 1;
  } catch (const InvalidArgument& e) {
    if (mpi.world_rank() == 0) std::fprintf(stderr, "tp_linear: %s\n", e.what());
    comm::Runtime::exit(2);
  }
}
