// The rank order (--grid-order) in the planner: where each group sits (its ip, and whether it is a
// ring of ranks ip apart), what a two-level network of nodes charges it, the orders a grid can tell
// apart, and the search over grids and orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "axonn/core/error.hpp"
#include "axonn/planner/cost_model.hpp"
#include "axonn/planner/planner.hpp"

namespace ap = axonn::planner;

namespace {

// Two ranks per node, 10 GB/s inside a node, 1 GB/s out of it, no table: every β is the fallback.
ap::MachineProfile two_level(long ranks_per_node = 2) {
  return ap::parse_machine_profile(
      R"({"name": "two-level", "gpus_per_node": )" + std::to_string(ranks_per_node) + R"(,
          "gpu": {"memory_gib": 80, "peak_tflops": 100, "gemm_efficiency": 1, "hbm_gbs": 1000},
          "network": {"intra_node_gbs": 10, "inter_node_gbs": 1,
                      "intra_node_latency_us": 2, "inter_node_latency_us": 500}})",
      "test");
}

ap::GridShape grid(int gx, int gy, int gz, int gd, const char* order = "xyz") {
  ap::GridShape g{gx, gy, gz, gd};
  g.order = axonn::layout::parse_grid_order(order);
  return g;
}

ap::Workload workload() {
  ap::Workload w;
  w.model = ap::gpt_shape("test", 4, 1024, 16, 50304);
  w.seq_len = 1024;
  w.batch_size = 8;
  return w;
}

// The first collective over `group` in a list.
const ap::CollectiveCost& over(const std::vector<ap::CollectiveCost>& cs, ap::CommGroup group) {
  auto it = std::find_if(cs.begin(), cs.end(), [&](const ap::CollectiveCost& c) { return c.group == group; });
  EXPECT_NE(it, cs.end()) << ap::to_string(group);
  return *it;
}

TEST(PlannerOrder, StridesFollowTheOrder) {
  const auto g = grid(2, 3, 4, 5, "zxy");
  using axonn::layout::GridAxis;
  EXPECT_EQ(g.stride(GridAxis::kZ), 1);
  EXPECT_EQ(g.stride(GridAxis::kX), 4);
  EXPECT_EQ(g.stride(GridAxis::kY), 8);
  EXPECT_EQ(g.tensor_parallel(), 24);  // the data axis' stride
  EXPECT_EQ(ap::to_string(g), "(Gx,Gy,Gz,Gdata)=(2,3,4,5) order z,x,y");
  EXPECT_EQ(ap::to_string(grid(2, 3, 4, 5)), "(Gx,Gy,Gz,Gdata)=(2,3,4,5)");
}

TEST(PlannerOrder, DistinctOrdersAreThoseOfTheAxesWithSeveralRanks) {
  EXPECT_EQ(axonn::layout::distinct_orders(grid(2, 2, 2, 1)).size(), 6u);
  EXPECT_EQ(axonn::layout::distinct_orders(grid(2, 1, 2, 4)).size(), 2u);  // x before z, z before x
  EXPECT_EQ(axonn::layout::distinct_orders(grid(1, 1, 4, 2)).size(), 1u);
  EXPECT_EQ(axonn::layout::distinct_orders(grid(1, 1, 1, 8)).size(), 1u);
  // AxoNN's order comes first (ties in the ranking keep it)
  EXPECT_EQ(axonn::layout::distinct_orders(grid(2, 2, 2, 1)).front(), axonn::layout::kAxonnGridOrder);
}

TEST(PlannerOrder, TheFastestAxisStaysInsideANode) {
  // 2x1x2x1 on nodes of 2: in x,y,z order X is inside a node (10 GB/s) and the two Z rings share each
  // node's link (1/2 GB/s); in z,x,y order the other way round
  const auto m = two_level();
  const auto layer = ap::block_linear_layers(workload().spec())[0];
  ap::CostSettings s;
  for (const char* order : {"xyz", "zxy"}) {
    const auto cs = ap::linear_layer_collectives(m, layer, 8192, 1, grid(2, 1, 2, 1, order), s);
    const auto& x = over(cs, ap::CommGroup::kX);
    const auto& z = over(cs, ap::CommGroup::kZ);
    const bool axonn = std::string(order) == "xyz";
    EXPECT_EQ(x.ip, axonn ? 1 : 2) << order;
    EXPECT_EQ(z.ip, axonn ? 2 : 1) << order;
    EXPECT_DOUBLE_EQ(x.bandwidth_gbs, axonn ? 10.0 : 0.5) << order;
    EXPECT_DOUBLE_EQ(z.bandwidth_gbs, axonn ? 0.5 : 10.0) << order;
    EXPECT_TRUE(x.ring && z.ring);
  }
}

TEST(PlannerOrder, ACompoundGroupSplitByAnotherAxisIsPricedByWhereItsRanksAre) {
  // 2x2x2x1, order x,z,y: X·Y = {0,1,4,5} (strides 1 and 4, Z between): no ring; on nodes of 4 it
  // spans 2 nodes with 2 ranks on each: 2 groups share a node's link, 1 GB/s · 2/4
  const auto m = two_level(4);
  ap::CostSettings s;
  const auto w = workload();
  const auto split = ap::embedding_collectives(m, w, grid(2, 2, 2, 1, "xzy"), s);
  const auto& xy = over(split, ap::CommGroup::kXY);
  EXPECT_FALSE(xy.ring);
  EXPECT_EQ(xy.ip, 1);
  EXPECT_DOUBLE_EQ(xy.bandwidth_gbs, 0.5);
  // its time: 2(p-1)/p·M/β + 2(p-1)·α(inter-node)
  const double want = 2 * 0.75 * xy.message_bytes / 0.5e9 + 2 * 3 * 500e-6;
  EXPECT_NEAR(xy.seconds, xy.calls * want, 1e-12 * xy.seconds);
  // in x,y,z order X·Y = {0,1,2,3}: a ring inside a node
  const auto in_order = ap::embedding_collectives(m, w, grid(2, 2, 2, 1), s);  // kept: `ring` refers into it
  const auto& ring = over(in_order, ap::CommGroup::kXY);
  EXPECT_TRUE(ring.ring);
  EXPECT_DOUBLE_EQ(ring.bandwidth_gbs, 10.0);
  // Z·data with Z outermost of X, Y, Z is a ring again (ip Gx·Gy); with Z fastest it is split by X, Y
  EXPECT_TRUE(over(ap::embedding_collectives(m, w, grid(2, 1, 2, 2), s), ap::CommGroup::kZData).ring);
  EXPECT_FALSE(over(ap::embedding_collectives(m, w, grid(2, 1, 2, 2, "zxy"), s), ap::CommGroup::kZData).ring);
}

TEST(PlannerOrder, FallbackLatencyIsThatOfWhereTheRingRuns) {
  const auto m = two_level();
  EXPECT_DOUBLE_EQ(m.latency_s(ap::CollectiveKind::kAllReduce, 1, 2), 2e-6);    // inside a node
  EXPECT_DOUBLE_EQ(m.latency_s(ap::CollectiveKind::kAllReduce, 2, 2), 500e-6);  // between nodes
  EXPECT_TRUE(m.inside_node(1, 2));
  EXPECT_FALSE(m.inside_node(1, 4));
}

TEST(PlannerOrder, SearchRanksEveryOrderAndPrefersTheHeavyGroupInsideANode) {
  // Tokens small, weights large: the Z all-gathers and reduce-scatters dominate, so the best grid
  // with Gz = 2 keeps Z inside a node (Z the fastest axis with more than one rank)
  ap::PlanRequest req;
  req.workload = workload();
  req.workload.batch_size = 2;
  req.workload.seq_len = 128;
  req.gpus = 4;
  req.search_orders = true;
  const auto r = ap::plan(two_level(), req);
  long configs = 0;
  for (const auto& g : ap::factorizations(4))
    if (!ap::inadmissible_reason(req.workload, g, 1)) configs += static_cast<long>(axonn::layout::distinct_orders(g).size());
  EXPECT_EQ(static_cast<long>(r.configs.size()), configs);
  EXPECT_GT(configs, r.admissible);  // some grids in two orders
  const auto z2 = std::find_if(r.configs.begin(), r.configs.end(), [](const ap::Estimate& e) {
    return e.grid.gz == 2 && e.grid.gx * e.grid.gy == 2;
  });
  ASSERT_NE(z2, r.configs.end());
  EXPECT_EQ(z2->grid.stride(axonn::layout::GridAxis::kZ), 1) << ap::to_string(z2->grid);
  // the table and the JSON say which order
  EXPECT_NE(ap::format_table(r, 0).find("order"), std::string::npos);
  EXPECT_NE(ap::to_json(r, 0).find("\"order\": \"x,z,y\""), std::string::npos);
  // without the search every grid keeps x,y,z and the JSON keeps issue 6's keys
  req.search_orders = false;
  const auto plain = ap::plan(two_level(), req);
  EXPECT_EQ(plain.admissible, r.admissible);
  EXPECT_EQ(static_cast<long>(plain.configs.size()), plain.admissible);
  EXPECT_EQ(ap::to_json(plain, 0).find("order"), std::string::npos);
}

TEST(PlannerOrder, ABadOrderIsRefused) {
  EXPECT_THROW(ap::estimate(two_level(), workload(), grid(1, 1, 1, 4, "xxz"), ap::CostSettings{}),
               axonn::InvalidArgument);
}

}  // namespace
