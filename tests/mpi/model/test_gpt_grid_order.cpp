// The rank order of the grid (GridShape::order, --grid-order) changes which ranks form each group,
// never what a grid coordinate computes: on every 4D grid of this world's size and every order of
// X, Y and Z that the grid can tell apart, the GPT trains to the bits of AxoNN's order (x,y,z) —
// losses and gradient norms of every step, and this rank's weights at the end compared with those
// of the rank that holds the same coordinates in AxoNN's order — and AxoNN's order trains to one
// rank's losses within fp32 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "tensor_expect.hpp"
#include "common/grid_shapes.hpp"
#include "common/test_models.hpp"

namespace axonn {
namespace {

using parallel::GridAxis;
using parallel::GridOrder;
using parallel::GridShape;

constexpr int kB = 8, kT = 7, kSteps = 3;

struct Trajectory {
  std::vector<float> losses;
  std::vector<double> norms;
  std::vector<float> weights;  // this rank's parameter shards after the last step
  parallel::GridCoords at;
};

// kSteps of AdamW on a grid of this shape (B sequences split over Z and data); false if the model does
// not admit the grid (refused alike on every rank, before any collective).
bool train(const GridShape& shape, const std::shared_ptr<comm::Communicator>& world, Trajectory& out) {
  const model::GptConfig cfg = test::tiny_gpt2();
  std::unique_ptr<parallel::Grid> grid;
  std::unique_ptr<model::Gpt> gpt;
  try {
    grid = std::make_unique<parallel::Grid>(shape, world);
    gpt = std::make_unique<model::Gpt>(cfg, *grid, kB / (shape.gz * shape.gdata), kT, kernels::Backend::kCpu);
  } catch (const InvalidArgument&) {
    return false;
  }
  optim::AdamW opt(gpt->params(), {0.9f, 0.95f, 1e-8f, 0.1f}, gpt->decay_mask(), kernels::ops_for(kernels::Backend::kCpu));
  gpt->init_random(11);
  out.at = grid->coords();
  const int block = out.at.d * shape.gz + out.at.z;
  const int64_t local = static_cast<int64_t>(kB / (shape.gz * shape.gdata)) * kT;
  for (int step = 0; step < kSteps; step++) {
    const std::vector<int> in = test::randint(kB * kT, cfg.vocab_size, 100 + step);
    const std::vector<int> tg = test::randint(kB * kT, cfg.vocab_size, 200 + step);
    out.losses.push_back(gpt->forward(in.data() + block * local, tg.data() + block * local));
    gpt->zero_grad();
    gpt->backward();
    gpt->sync_gradients();
    out.norms.push_back(gpt->grad_norm());
    opt.step(gpt->params(), gpt->grads(), 1e-2f, optim::clip_scale(out.norms.back(), 1.0f));
  }
  for (size_t i = 0; i < gpt->params().size(); i++) {
    const Tensor t = gpt->params().tensor(i);
    out.weights.insert(out.weights.end(), t.f32(), t.f32() + t.numel());
  }
  return true;
}

TEST(GptGridOrder, EveryOrderTrainsTheBitsOfAxonnOrder) {
  auto world = comm::world();
  const int n = world->size(), me = world->rank();
  std::shared_ptr<comm::Communicator> self(world->split(me, 0, "self"));
  Trajectory one;
  ASSERT_TRUE(train({1, 1, 1, 1}, self, one));
  int grids = 0, orders = 0;
  for (GridShape shape : test::grid_shapes(n)) {
    if (kB % (shape.gz * shape.gdata) != 0) continue;
    Trajectory axonn;
    if (!train(shape, world, axonn)) continue;  // AxoNN's order first: the reference
    grids++;
    for (int s = 0; s < kSteps; s++)
      EXPECT_NEAR(axonn.losses[s], one.losses[s], 2e-6f * std::fabs(one.losses[s])) << shape.str() << " step " << s;
    // every rank's coordinates and weights in AxoNN's order (shards may differ in size between ranks)
    std::vector<int32_t> coords(4 * static_cast<size_t>(n));
    const int32_t mine[4] = {axonn.at.x, axonn.at.y, axonn.at.z, axonn.at.d};
    world->all_gather(mine, coords.data(), 4, DType::kI32);  // over world
    std::vector<int64_t> sizes(static_cast<size_t>(n));
    const int64_t my_size = static_cast<int64_t>(axonn.weights.size());
    world->all_gather(&my_size, sizes.data(), 1, DType::kI64);  // over world
    std::vector<size_t> counts(sizes.begin(), sizes.end()), offsets(counts.size(), 0);
    for (size_t q = 1; q < counts.size(); q++) offsets[q] = offsets[q - 1] + counts[q - 1];
    std::vector<float> all(offsets.back() + counts.back());
    world->all_gather_v(axonn.weights.data(), axonn.weights.size(), all.data(), counts, DType::kF32);  // over world
    // the orders the grid can tell apart: orders of its axes of extent > 1 (the others go anywhere)
    for (const GridOrder& order : layout::distinct_orders(shape)) {
      if (order == parallel::kAxonnGridOrder) continue;
      shape.order = order;
      SCOPED_TRACE(shape.str());
      Trajectory r;
      ASSERT_TRUE(train(shape, world, r));
      orders++;
      for (int s = 0; s < kSteps; s++) {
        EXPECT_EQ(std::memcmp(&r.losses[s], &axonn.losses[s], sizeof(float)), 0) << "loss, step " << s;
        EXPECT_EQ(std::memcmp(&r.norms[s], &axonn.norms[s], sizeof(double)), 0) << "grad norm, step " << s;
      }
      // this rank's coordinates were held by AxoNN's rank `peer`: its weights come here to compare
      int peer = -1;
      for (int q = 0; q < n; q++)
        if (coords[4 * q] == r.at.x && coords[4 * q + 1] == r.at.y && coords[4 * q + 2] == r.at.z &&
            coords[4 * q + 3] == r.at.d)
          peer = q;
      ASSERT_GE(peer, 0);
      const auto p = static_cast<size_t>(peer);
      ASSERT_EQ(r.weights.size(), counts[p]);
      EXPECT_EQ(std::memcmp(r.weights.data(), all.data() + offsets[p], counts[p] * sizeof(float)), 0)
          << "weights after " << kSteps << " steps (coordinates held by rank " << peer << " in AxoNN's order)";
    }
  }
  EXPECT_GT(grids, 0);
  if (n >= 4) {
    EXPECT_GT(orders, 0);
  }
  if (me == 0) std::printf("checked %d other orders of %d grids of %d ranks\n", orders, grids, n);
}

}  // namespace
}  // namespace axonn
