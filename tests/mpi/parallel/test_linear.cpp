// The tensor-parallel Linear over real MPI ranks, for every grid of this world's size, both
// orientations, and a chain normal -> transposed -> normal -> transposed: this rank's pieces of the
// output, the input gradient, the weight gradient (its Z shard) and the bias gradient equal the
// single-rank layer's at the same global positions. With OAR and ORS on (the dx all-reduce under the
// dW GEMM, the dW reduce-scatters queued in a pool of two blocks and retired later) every piece is
// bit-identical to the run without overlap.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/parallel/linear.hpp"
#include "axonn/parallel/overlap.hpp"
#include "tensor_expect.hpp"
#include "common/grid_shapes.hpp"

namespace axonn::parallel {
namespace {

using Vec = std::vector<float>;
const kernels::Ops& ops() { return kernels::ops_for(kernels::Backend::kCpu); }

// One layer, full (single-rank) and this rank's pieces.
struct Layer {
  TpLinearSpec spec;
  Vec w, b;  // full W [out, in], b [out]
};

// Rows [r0, r0 + rows) and the columns `col(c)` (c < ncols) of a row-major matrix of width `width`.
template <typename ColFn>
Vec pick(const Vec& m, int width, int64_t r0, int64_t rows, int ncols, ColFn col) {
  Vec out;
  for (int64_t r = r0; r < r0 + rows; r++)
    for (int c = 0; c < ncols; c++) out.push_back(m[r * width + col(c)]);
  return out;
}

// Runs a chain of layers on the grid and on one rank; compares every piece. Returns this rank's
// pieces (outputs, then per layer weight and bias gradient, then the input gradient).
std::vector<Vec> check_chain(const Grid& grid, const std::vector<Layer>& layers, int64_t m_total, bool overlap) {
  const GridShape& g = grid.shape();
  const int blocks = g.gz * g.gdata, block = grid.coords().d * g.gz + grid.coords().z;
  const int64_t m = m_total / blocks, r0 = block * m;
  std::vector<TpLinear> lin;
  for (size_t i = 0; i < layers.size(); i++) lin.emplace_back(grid, layers[i].spec, "test");

  // single-rank reference, through the same kernels
  const int in0 = layers[0].spec.in;
  Vec x_full = test::randn(static_cast<size_t>(m_total) * in0, 7);
  std::vector<Vec> acts_full{x_full};
  for (const Layer& l : layers) {
    Vec y(static_cast<size_t>(m_total) * l.spec.out);
    ops().matmul_forward(y.data(), acts_full.back().data(), l.w.data(), l.b.data(), m_total, l.spec.in, l.spec.out);
    acts_full.push_back(y);
  }
  Vec dy_full = test::randn(acts_full.back().size(), 8);
  std::vector<Vec> dw_full(layers.size()), db_full(layers.size());
  Vec d = dy_full;
  for (size_t i = layers.size(); i-- > 0;) {
    const Layer& l = layers[i];
    Vec dx(static_cast<size_t>(m_total) * l.spec.in, 0.0f);
    dw_full[i].assign(l.w.size(), 0.0f);
    db_full[i].assign(l.b.size(), 0.0f);
    ops().matmul_backward(dx.data(), dw_full[i].data(), db_full[i].data(), d.data(), acts_full[i].data(),
                          l.w.data(), m_total, l.spec.in, l.spec.out);
    d = dx;
  }
  const Vec dx_full = d;

  // the grid: x is this rank's tokens and the input block of the first layer
  const TpLinearLayout& l0 = lin[0].layout();
  std::vector<Vec> acts{pick(x_full, in0, r0, m, l0.in_local, [&](int c) { return l0.in_block * l0.in_local + c; })};
  std::vector<Vec> shards(layers.size()), biases(layers.size());
  int64_t max_block = 0;
  for (size_t i = 0; i < layers.size(); i++) {
    const TpLinearLayout& L = lin[i].layout();
    max_block = std::max(max_block, L.block_size);
    for (int64_t j = 0; j < L.shard_size; j++) shards[i].push_back(layers[i].w[L.weight_index(L.shard_offset + j)]);
    for (int r = 0; r < L.out_local; r++) biases[i].push_back(layers[i].b[L.out_row(r)]);
  }
  Vec gathered(max_block);
  Timeline tl;
  ReduceScatterQueue queue(tl, 2, overlap);
  const LinearRun run{ops(), tl, &queue, overlap};
  std::vector<Vec> pieces;
  for (size_t i = 0; i < layers.size(); i++) {
    const TpLinearLayout& L = lin[i].layout();
    Vec y(static_cast<size_t>(m) * L.out_local);
    const float* w = lin[i].gather_weight(shards[i].data(), gathered.data(), tl);
    lin[i].forward(y.data(), acts.back().data(), w, biases[i].data(), m, run);
    pieces.push_back(y);
    Vec want = pick(acts_full[i + 1], layers[i].spec.out, r0, m, L.out_local,
                    [&](int c) { return static_cast<int>(L.out_row(c)); });
    EXPECT_TRUE(test::allclose(y, want, 1e-5f, 1e-5f)) << "forward of layer " << i;
    acts.push_back(y);
  }
  const TpLinearLayout& ll = lin.back().layout();
  d = pick(dy_full, layers.back().spec.out, r0, m, ll.out_local, [&](int c) { return static_cast<int>(ll.out_row(c)); });
  // the weight gradients stay in flight (ORS) until the queue is drained: they outlive the loop
  std::vector<Vec> dws(layers.size()), dbs(layers.size());
  for (size_t i = layers.size(); i-- > 0;) {
    const TpLinearLayout& L = lin[i].layout();
    Vec dx(static_cast<size_t>(m) * L.in_local, 0.0f);
    dws[i].assign(L.shard_size, 0.0f);
    dbs[i].assign(L.out_local, 0.0f);
    const float* w = lin[i].gather_weight(shards[i].data(), gathered.data(), tl);
    lin[i].backward(dx.data(), dws[i].data(), dbs[i].data(), d.data(), acts[i].data(), w, m, static_cast<int>(i), run);
    d = dx;
  }
  queue.drain();
  std::vector<int> retired = queue.take_retired();
  EXPECT_EQ(retired.size(), layers.size()) << "every layer's shard completes once";
  for (size_t k = 0; k < retired.size(); k++) EXPECT_EQ(retired[k], static_cast<int>(layers.size() - 1 - k));
  for (size_t i = 0; i < layers.size(); i++) {
    const TpLinearLayout& L = lin[i].layout();
    Vec& dw = dws[i];
    Vec& db = dbs[i];
    // the weight gradient: this rank's shard, summed over Z here and over data below
    grid.data().all_reduce(dw.data(), dw.size(), DType::kF32);
    // the bias gradient: dy is the same on every rank of the input group; sum over Z and data
    grid.z().all_reduce(db.data(), db.size(), DType::kF32);
    grid.data().all_reduce(db.data(), db.size(), DType::kF32);
    Vec want_dw, want_db;
    for (int64_t j = 0; j < L.shard_size; j++) want_dw.push_back(dw_full[i][L.weight_index(L.shard_offset + j)]);
    for (int r = 0; r < L.out_local; r++) want_db.push_back(db_full[i][L.out_row(r)]);
    EXPECT_TRUE(test::allclose(dw, want_dw, 1e-4f, 1e-4f)) << "weight gradient of layer " << i;
    EXPECT_TRUE(test::allclose(db, want_db, 1e-4f, 1e-4f)) << "bias gradient of layer " << i;
    pieces.push_back(dw);
    pieces.push_back(db);
  }
  Vec want_dx = pick(dx_full, in0, r0, m, l0.in_local, [&](int c) { return l0.in_block * l0.in_local + c; });
  EXPECT_TRUE(test::allclose(d, want_dx, 1e-4f, 1e-4f)) << "input gradient";
  pieces.push_back(d);
  return pieces;
}

Layer make_layer(TpLinearSpec spec, uint32_t seed) {
  return {spec, test::randn(static_cast<size_t>(spec.out) * spec.in, seed, 0.3f), test::randn(spec.out, seed + 1)};
}

class LinearOnGrid : public ::testing::Test {
 protected:
  // Runs `chain` on every grid of the world that admits it; returns how many grids ran.
  int run_all(const std::vector<Layer>& chain, int64_t m_total) {
    auto world = comm::world();
    int ran = 0;
    for (const GridShape& s : test::grid_shapes(world->size())) {
      if (m_total % (s.gz * s.gdata) != 0) continue;
      Grid grid(s, world);
      bool admitted = true;
      try {
        for (const Layer& l : chain) TpLinearLayout(l.spec, s, grid.coords());
      } catch (const InvalidArgument&) {
        admitted = false;  // alike on every rank: the shape does not divide
      }
      if (!admitted) continue;
      SCOPED_TRACE(grid.str());
      const std::vector<Vec> plain = check_chain(grid, chain, m_total, false);
      const std::vector<Vec> overlapped = check_chain(grid, chain, m_total, true);
      EXPECT_EQ(plain, overlapped) << "OAR + ORS changed the results";
      ran++;
    }
    return ran;
  }
};

TEST_F(LinearOnGrid, Normal) {
  EXPECT_GT(run_all({make_layer({.in = 24, .out = 48}, 1)}, 24), 0);
}

TEST_F(LinearOnGrid, Transposed) {
  EXPECT_GT(run_all({make_layer({.in = 48, .out = 24, .transposed = true}, 2)}, 24), 0);
}

TEST_F(LinearOnGrid, StackedOutputPartsLikeQkv) {
  EXPECT_GT(run_all({make_layer({.in = 24, .out = 72, .out_parts = {24, 24, 24}}, 3)}, 24), 0);
}

TEST_F(LinearOnGrid, UnequalOutputPartsLikeGroupedQueryQkv) {
  // q of 48 rows, k and v of 24 (grouped-query attention): each part split over Y alone
  EXPECT_GT(run_all({make_layer({.in = 24, .out = 96, .out_parts = {48, 24, 24}}, 9)}, 24), 0);
}

TEST_F(LinearOnGrid, ChainNormalTransposedNormalTransposed) {
  // an MLP twice: 24 -> 48 (A) -> 24 (B) -> 48 (A) -> 24 (B): no re-layout between layers
  std::vector<Layer> chain{make_layer({.in = 24, .out = 48}, 4), make_layer({.in = 48, .out = 24, .transposed = true}, 5),
                           make_layer({.in = 24, .out = 48}, 6), make_layer({.in = 48, .out = 24, .transposed = true}, 7)};
  EXPECT_GT(run_all(chain, 24), 0);
}

TEST(LinearLayout, RefusesGridsThatDoNotDivide) {
  GridShape s{3, 1, 1, 1};
  try {
    TpLinearLayout({.in = 16, .out = 24}, s, {}, "fc");
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("16 input features are not divisible by Gx=3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(TpLinearLayout({.in = 16, .out = 24, .transposed = true}, GridShape{1, 5, 1, 1}, {}), InvalidArgument);
  EXPECT_THROW(TpLinearLayout({.in = 4, .out = 6}, GridShape{1, 1, 5, 1}, {}), InvalidArgument);  // 24 % 5
}

}  // namespace
}  // namespace axonn::parallel
