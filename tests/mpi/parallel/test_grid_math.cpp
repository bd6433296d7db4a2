// The grid's rank mapping as pure functions (no MPI): AxoNN's worked example on 16 ranks, round
// trips for many shapes, group membership, and --grid parsing and validation messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/parallel/grid.hpp"

namespace axonn::parallel {
namespace {

TEST(GridMath, AxonnWorkedExampleOn2x2x2x2) {
  // spec/axonn.md §2.1: rank 13 -> d=1, z=1, y=0, x=1; X {12,13}, Y {13,15}, Z {9,13}, data {5,13}.
  const GridShape s{2, 2, 2, 2};
  EXPECT_EQ(grid_coords(s, 13), (GridCoords{1, 0, 1, 1}));
  EXPECT_EQ(grid_rank(s, {1, 0, 1, 1}), 13);
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kX), (std::vector<int>{12, 13}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kY), (std::vector<int>{13, 15}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kZ), (std::vector<int>{9, 13}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kZ2), (std::vector<int>{9, 13}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kData), (std::vector<int>{5, 13}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kXY), (std::vector<int>{12, 13, 14, 15}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kXYZ),
            (std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kZData), (std::vector<int>{1, 5, 9, 13}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kWorld).size(), 16u);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kX), 1);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kY), 0);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kZ), 1);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kData), 1);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kXY), 1);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kXYZ), 5);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kZData), 3);  // z = 1, d = 1
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kWorld), 13);
}

TEST(GridMath, OrderZXYOn2x2x2x2) {
  // order z,x,y: world_rank = ((d*Gy + y)*Gx + x)*Gz + z; rank 13 -> d=1, then 5 = z + 2*(x + 2*y)
  GridShape s{2, 2, 2, 2};
  s.order = parse_grid_order("z,x,y");
  EXPECT_EQ(s.str(), "2x2x2x2 order z,x,y");
  EXPECT_EQ(grid_coords(s, 13), (GridCoords{0, 1, 1, 1}));
  EXPECT_EQ(grid_rank(s, {0, 1, 1, 1}), 13);
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kZ), (std::vector<int>{12, 13}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kX), (std::vector<int>{13, 15}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kY), (std::vector<int>{9, 13}));
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kData), (std::vector<int>{5, 13}));
  // members in group-rank order (X fastest within the group), not in world order
  EXPECT_EQ(grid_group_members(s, 13, GridGroup::kXY), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(grid_group_members(s, 12, GridGroup::kXYZ), (std::vector<int>{8, 10, 12, 14, 9, 11, 13, 15}));
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kXY), 2);
  EXPECT_EQ(grid_group_rank(s, 13, GridGroup::kXYZ), 6);  // (z*Gy + y)*Gx + x = (2 + 1)*2 + 0
  // order y,z,x on 1x3x2x1: world_rank = x*6 + z*3 + y
  GridShape t{1, 3, 2, 1};
  t.order = parse_grid_order("yzx");
  EXPECT_EQ(grid_coords(t, 4), (GridCoords{0, 1, 1, 0}));
  EXPECT_EQ(grid_group_members(t, 4, GridGroup::kY), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(grid_group_members(t, 4, GridGroup::kZ), (std::vector<int>{1, 4}));
}

TEST(GridMath, OddShapes) {
  // 3x1x1x1: one X group of everything.
  EXPECT_EQ(grid_group_members({3, 1, 1, 1}, 2, GridGroup::kX), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(grid_group_members({3, 1, 1, 1}, 2, GridGroup::kData), (std::vector<int>{2}));
  // 1x3x1x2: Y groups {0,1,2} and {3,4,5}; data groups {q, q+3}.
  const GridShape s{1, 3, 1, 2};
  EXPECT_EQ(grid_coords(s, 4), (GridCoords{0, 1, 0, 1}));
  EXPECT_EQ(grid_group_members(s, 4, GridGroup::kY), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(grid_group_members(s, 4, GridGroup::kData), (std::vector<int>{1, 4}));
  EXPECT_EQ(grid_group_members(s, 4, GridGroup::kX), (std::vector<int>{4}));
  EXPECT_EQ(grid_group_members(s, 4, GridGroup::kXYZ), (std::vector<int>{3, 4, 5}));
  // 3x2x5x1: Z group of rank 7 (x=1, y=0... ) = 7 + 6k.
  EXPECT_EQ(grid_group_members({3, 2, 5, 1}, 7, GridGroup::kZ), (std::vector<int>{1, 7, 13, 19, 25}));
}

TEST(GridMath, EveryRankRoundTripsAndGroupsPartitionTheWorld) {
  const int e[] = {1, 2, 3};
  for (const char* order : {"xyz", "xzy", "yxz", "yzx", "zxy", "zyx"})
  for (int gx : e) for (int gy : e) for (int gz : e) for (int gd : e) {
    const GridShape s{gx, gy, gz, gd, parse_grid_order(order)};
    const bool axonn_order = s.order == kAxonnGridOrder;
    for (int r = 0; r < s.size(); ++r) {
      const GridCoords c = grid_coords(s, r);
      ASSERT_EQ(grid_rank(s, c), r) << s.str();
      EXPECT_TRUE(c.x < gx && c.y < gy && c.z < gz && c.d < gd);
    }
    for (GridGroup g : kAllGridGroups) {
      // Every rank is in exactly one group of each kind, at the index grid_group_rank gives.
      std::set<std::vector<int>> groups;
      for (int r = 0; r < s.size(); ++r) {
        const auto m = grid_group_members(s, r, g);
        const int k = grid_group_rank(s, r, g);
        ASSERT_TRUE(k >= 0 && k < static_cast<int>(m.size())) << s.str();
        EXPECT_EQ(m[static_cast<size_t>(k)], r) << s.str() << " " << grid_group_name(g);
        // in AxoNN's order group rank follows world rank (X fastest in both)
        if (axonn_order) {
          EXPECT_TRUE(std::is_sorted(m.begin(), m.end()));
        }
        // a group's members, whatever the order, are those that share its fixed coordinates
        for (int q : m) EXPECT_EQ(grid_group_members(s, q, g), m) << s.str();
        groups.insert(m);
      }
      size_t covered = 0;
      for (const auto& m : groups) covered += m.size();
      EXPECT_EQ(covered, static_cast<size_t>(s.size())) << s.str() << " " << grid_group_name(g);
      const size_t want_size = g == GridGroup::kX ? gx : g == GridGroup::kY ? gy
                             : g == GridGroup::kZ || g == GridGroup::kZ2 ? gz
                             : g == GridGroup::kXY ? gx * gy : g == GridGroup::kXYZ ? gx * gy * gz
                             : g == GridGroup::kData ? gd : g == GridGroup::kZData ? gz * gd : s.size();
      EXPECT_EQ(groups.begin()->size(), want_size) << s.str() << " " << grid_group_name(g);
    }
  }
}

TEST(GridParse, AcceptsCommasOrXAndDefaultsToDataParallel) {
  EXPECT_EQ(parse_grid("2,2,1,3", 12), (GridShape{2, 2, 1, 3}));
  EXPECT_EQ(parse_grid("2x2x1x3", 12), (GridShape{2, 2, 1, 3}));
  EXPECT_EQ(parse_grid("", 6), (GridShape{1, 1, 1, 6}));
  EXPECT_EQ((GridShape{2, 2, 1, 3}).str(), "2x2x1x3");
}

TEST(GridParse, NamedDegreesMeanTheSameGrid) {
  EXPECT_EQ(parse_grid("tp-x=2,tp-y=2,fsdp=4,dp=2", 32), (GridShape{2, 2, 4, 2}));
  EXPECT_EQ(parse_grid("dp=2,fsdp=4,tp-y=2,tp-x=2", 32), (GridShape{2, 2, 4, 2}));  // any order
  EXPECT_EQ(parse_grid("tp-x=2", 8), (GridShape{2, 1, 1, 4}));                      // dp fills the ranks
  EXPECT_EQ(parse_grid("fsdp=2,dp=1", 2), (GridShape{1, 1, 2, 1}));
  for (const char* bad : {"tp=2", "tp-x=0", "tp-x=2,tp-x=2", "tp-x=", "tp-x=2,", "tp-x=2,fsdp", "fsdp=2x",
                          "tp-x=2,dp=1,tp-z=2"}) {
    try {
      parse_grid(bad, 8);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--grid by named degrees wants tp-x=N (X), tp-y=N (Y), fsdp=N (Z), dp=N"),
                std::string::npos) << e.what();
    }
  }
  try {
    parse_grid("tp-y=3", 4);
    ADD_FAILURE() << "dp filled 4 ranks with a model of 3";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("tp-x * tp-y * fsdp = 3 does not divide the job's 4 ranks"), std::string::npos)
        << e.what();
  }
}

TEST(GridParse, OrderIsAPermutationOfXYZ) {
  EXPECT_EQ(parse_grid_order("x,y,z"), kAxonnGridOrder);
  EXPECT_EQ(parse_grid_order("xyz"), kAxonnGridOrder);
  EXPECT_EQ(parse_grid_order("z,x,y"), (GridOrder{GridAxis::kZ, GridAxis::kX, GridAxis::kY}));
  EXPECT_EQ(grid_order_str(parse_grid_order("yzx")), "y,z,x");
  EXPECT_EQ((GridShape{2, 2, 1, 3}).str(), "2x2x1x3");  // the default order is not spelled out
  for (const char* bad : {"", "x,y", "x,y,y", "x,y,z,d", "x,,y,z", "xy,z", "X,Y,Z", "a,b,c", "x y z", ",x,y"}) {
    try {
      parse_grid_order(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--grid-order wants x, y and z once each, fastest first"),
                std::string::npos) << e.what();
    }
  }
}

TEST(GridPlacement, WhichGroupsStayInsideANode) {
  // 2x1x2x1 on 2 nodes of 2 ranks: X groups {0,1} {2,3} inside; Z groups {0,2} {1,3} across both
  const auto nodes = block_nodes(4, 2);
  EXPECT_EQ(nodes, (std::vector<int>{0, 0, 1, 1}));
  GridShape s{2, 1, 2, 1};
  EXPECT_EQ(grid_group_nodes(s, GridGroup::kX, nodes), 1);
  EXPECT_EQ(grid_group_nodes(s, GridGroup::kZ, nodes), 2);
  EXPECT_EQ(grid_group_nodes(s, GridGroup::kY, nodes), 1);  // one rank each
  EXPECT_EQ(grid_group_nodes(s, GridGroup::kWorld, nodes), 2);
  // Z fastest: now Z stays inside, X crosses
  s.order = parse_grid_order("z,x,y");
  EXPECT_EQ(grid_group_nodes(s, GridGroup::kZ, nodes), 1);
  EXPECT_EQ(grid_group_nodes(s, GridGroup::kX, nodes), 2);
  // 2x2x2x2 on 4 nodes of 4: X·Y inside, Z and data across 2 nodes each, X·Y·Z across 2
  const auto four = block_nodes(16, 4);
  const GridShape t{2, 2, 2, 2};
  EXPECT_EQ(grid_group_nodes(t, GridGroup::kXY, four), 1);
  EXPECT_EQ(grid_group_nodes(t, GridGroup::kZ, four), 2);
  EXPECT_EQ(grid_group_nodes(t, GridGroup::kData, four), 2);
  EXPECT_EQ(grid_group_nodes(t, GridGroup::kXYZ, four), 2);
  EXPECT_EQ(grid_group_nodes(t, GridGroup::kZData, four), 4);
  EXPECT_EQ(grid_placement_str(t, four), "X inside nodes, Y inside nodes, Z across 2 nodes, data across 2 nodes");
  EXPECT_EQ(grid_placement_str({2, 1, 2, 1}, nodes), "X inside nodes, Z across 2 nodes");
  EXPECT_EQ(grid_placement_str(s, nodes), "X across 2 nodes, Z inside nodes");  // z,x,y
  EXPECT_EQ(grid_placement_str(t, block_nodes(16, 16)), "one node");
  // nodes need not be blocks: any labels
  EXPECT_EQ(grid_group_nodes({4, 1, 1, 1}, GridGroup::kX, {7, 3, 7, 3}), 2);
  EXPECT_THROW(grid_group_nodes(t, GridGroup::kX, nodes), Error);  // 16 ranks, 4 nodes given
}

TEST(GridParse, RejectsMalformedText) {
  for (const char* bad : {"2,2,2", "2,2,2,2,2", "2,0,1,1", "a,1,1,1", "2,,1,1", "2,2,1,1,",
                          "-1,1,1,1", " 1,1,1,1", "2;2;1;1"}) {
    try {
      parse_grid(bad, 4);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--grid wants four positive integers GX,GY,GZ,GD"),
                std::string::npos) << e.what();
    }
  }
}

TEST(GridCheck, NamesTheGridTheWorldAndTheFix) {
  EXPECT_NO_THROW(check_grid({2, 2, 1, 1}, 4));
  try {
    check_grid({2, 2, 2, 1}, 4);
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "grid 2x2x2x1 = 8 ranks, but the job has 4; change --grid or mpirun -np");
  }
  EXPECT_THROW(check_grid({0, 1, 1, 4}, 4), InvalidArgument);
  EXPECT_THROW(check_grid({65536, 65536, 1, 1}, 4), InvalidArgument);  // no int overflow
}

}  // namespace
}  // namespace axonn::parallel
