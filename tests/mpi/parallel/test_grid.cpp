// The Grid over real MPI processes: for every grid shape whose product is the number of ranks,
// every rank's coordinates, and for every group its communicator's size, this rank's index in it,
// and its members (gathered over the communicator itself) against the pure mapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"
#include "axonn/core/error.hpp"
#include "axonn/parallel/grid.hpp"
#include "common/grid_shapes.hpp"

namespace axonn::parallel {
namespace {

// The six orders of X, Y and Z.
std::vector<GridOrder> all_orders() {
  std::vector<GridOrder> orders;
  for (const char* o : {"xyz", "xzy", "yxz", "yzx", "zxy", "zyx"}) orders.push_back(parse_grid_order(o));
  return orders;
}

TEST(Grid, EveryShapeAndOrderOfThisWorld) {
  auto world = comm::world();
  const int n = world->size(), r = world->rank();
  std::vector<GridShape> shapes;
  for (GridShape s : test::grid_shapes(n))
    for (const GridOrder& o : all_orders()) s.order = o, shapes.push_back(s);
  EXPECT_FALSE(shapes.empty());
  for (const GridShape& s : shapes) {
    Grid grid(s, world);
    EXPECT_EQ(grid.coords(), grid_coords(s, r)) << grid.str();
    const GridCoords c = grid.coords();
    EXPECT_EQ(grid.x().rank(), c.x);
    EXPECT_EQ(grid.y().rank(), c.y);
    EXPECT_EQ(grid.z().rank(), c.z);
    EXPECT_EQ(grid.z2().rank(), c.z);
    EXPECT_EQ(grid.data().rank(), c.d);
    EXPECT_EQ(grid.xy().rank(), c.y * s.gx + c.x);
    EXPECT_EQ(grid.xyz().rank(), (c.z * s.gy + c.y) * s.gx + c.x);
    for (GridGroup g : kAllGridGroups) {
      comm::Communicator& comm = grid.group(g);
      const auto want = grid_group_members(s, r, g);
      EXPECT_EQ(comm.name(), grid_group_name(g));
      EXPECT_EQ(comm.size(), static_cast<int>(want.size())) << s.str() << " " << comm.name();
      EXPECT_EQ(comm.rank(), grid_group_rank(s, r, g)) << s.str() << " " << comm.name();
      std::vector<int32_t> got(want.size());
      int32_t me = r;
      comm.all_gather(&me, got.data(), 1, DType::kI32);  // over group g
      EXPECT_EQ(std::vector<int>(got.begin(), got.end()), want) << s.str() << " " << comm.name();
    }
  }
}

TEST(Grid, SecondZIsIndependentOfZ) {
  // A reduce-scatter on Z and an all-gather on the second Z in flight together, waited in reverse.
  auto world = comm::world();
  const int n = world->size();
  Grid grid({1, 1, n, 1}, world);
  const auto gz = static_cast<size_t>(n);
  const size_t count = 5000;
  std::vector<float> grads(count * gz, 1.0f), shard(count);
  std::vector<float> w_shard(count, float(grid.coords().z)), w_full(count * gz);
  auto rs = grid.z().reduce_scatter_async(grads.data(), shard.data(), count, DType::kF32);  // over Z
  auto ag = grid.z2().all_gather_async(w_shard.data(), w_full.data(), count, DType::kF32);  // over Z2
  ag->wait();
  rs->wait();
  int bad = 0;
  for (float v : shard) bad += v != float(n);
  for (size_t k = 0; k < w_full.size(); ++k) bad += w_full[k] != float(k / count);
  EXPECT_EQ(bad, 0);
}

TEST(Grid, WrongSizeIsRefusedBeforeAnyCommunication) {
  auto world = comm::world();
  const int n = world->size();
  try {
    Grid grid({2, 2, 2, n}, world);  // 8n ranks, never the job's n
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    const std::string want = "grid 2x2x2x" + std::to_string(n) + " = " + std::to_string(8 * n) +
                             " ranks, but the job has " + std::to_string(n) +
                             "; change --grid or mpirun -np";
    EXPECT_EQ(e.what(), want);
  }
  // Still in step: a collective works.
  int32_t one = 1;
  world->all_reduce(&one, 1, DType::kI32);
  EXPECT_EQ(one, n);
}

TEST(Grid, DefaultIsPureDataParallelism) {
  auto world = comm::world();
  Grid grid(parse_grid("", world->size()), world);
  EXPECT_EQ(grid.data().size(), world->size());
  EXPECT_EQ(grid.xyz().size(), 1);
}

}  // namespace
}  // namespace axonn::parallel
