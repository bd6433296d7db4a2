// layout/grid.hpp — AxoNN's 4D process grid as geometry: shape, rank order, coordinates, groups and
// their members, node placement. Pure functions, no MPI: the communicators (parallel/grid.hpp), the
// model's shards (model/shard_map.hpp), checkpoints and the planner's cost model all derive from here.
//
// The job's ranks form a grid Gx × Gy × Gz × Gdata (spec/axonn.md §2). Names, AxoNN's in brackets:
//   X (G_intra_c, "column", inner): splits the input features of a layer; forward all-reduce group
//   Y (G_intra_r, "row", outer):    splits the output features; backward all-reduce group
//   Z (G_intra_d, "depth"):         splits the tokens and shards the weights ZeRO-3 style
//   data (G_data):                  plain data parallelism
// Rank order, X fastest, then Y, then Z, then data (AxoNN's; X groups are contiguous ranks, the most
// likely to share a node):
//   world_rank = ((d*Gz + z)*Gy + y)*Gx + x
// e.g. on a 2x2x2x2 grid rank 13 is (x,y,z,d) = (1,0,1,1); its X group is {12,13}, Y {13,15},
// Z {9,13}, data {5,13}. The order of X, Y and Z can be changed (GridShape::order, --grid-order, as
// AxoNN SC'24's tensor_parallel_order): with order z,x,y, world_rank = ((d*Gy + y)*Gx + x)*Gz + z,
// and the Z groups are the contiguous ones. Data is always outermost. The order decides only which
// ranks form a group, so which groups share a node; never what a rank computes.
//
// A group fixes some coordinates and varies the others; a rank's index in a group is the linearised
// varying coordinates, X fastest (so its X-group index is its x, and its X·Y index y*Gx + x). Groups:
// X, Y, Z, a second Z (same ranks, an independent communicator for the weight all-gathers), X·Y
// (vocabulary-parallel embedding and loss), X·Y·Z (one model replica), data, Z·data (every rank that
// saw other tokens), world.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::layout {

enum class GridAxis { kX, kY, kZ };
// The order in which consecutive world ranks run through X, Y and Z, fastest first.
using GridOrder = std::array<GridAxis, 3>;
inline constexpr GridOrder kAxonnGridOrder = {GridAxis::kX, GridAxis::kY, GridAxis::kZ};

// The grid's extent along each axis, and the order of the ranks.
struct GridShape {
  int gx = 1;
  int gy = 1;
  int gz = 1;
  int gdata = 1;
  GridOrder order = kAxonnGridOrder;

  // Number of ranks the grid needs (product of the four; assumes a valid shape).
  int size() const { return gx * gy * gz * gdata; }
  // Ranks of one model replica: Gx·Gy·Gz.
  int tensor_parallel() const { return gx * gy * gz; }
  // Extent along one of X, Y, Z.
  int extent(GridAxis a) const { return a == GridAxis::kX ? gx : a == GridAxis::kY ? gy : gz; }
  // Distance in world ranks between neighbours along `a`: the product of the extents of the axes
  // before it in the order (along data: tensor_parallel()).
  int stride(GridAxis a) const;
  bool axonn_order() const { return order == kAxonnGridOrder; }
  // "2x2x2x1" (Gx x Gy x Gz x Gdata), followed by " order z,x,y" when the order is not x,y,z.
  std::string str() const;
  bool operator==(const GridShape&) const = default;
};

// A rank's position in the grid.
struct GridCoords {
  int x = 0;
  int y = 0;
  int z = 0;
  int d = 0;
  bool operator==(const GridCoords&) const = default;
};

enum class GridGroup { kX, kY, kZ, kZ2, kXY, kXYZ, kData, kZData, kWorld };
inline constexpr GridGroup kAllGridGroups[] = {GridGroup::kX,    GridGroup::kY,     GridGroup::kZ,
                                               GridGroup::kZ2,   GridGroup::kXY,    GridGroup::kXYZ,
                                               GridGroup::kData, GridGroup::kZData, GridGroup::kWorld};
// "x", "y", "z", "z2", "xy", "xyz", "data", "zdata", "world" (also the communicators' names).
std::string_view grid_group_name(GridGroup g);

// Which coordinates a group varies (the others are fixed).
struct GridGroupAxes {
  bool x, y, z, d;
};
GridGroupAxes grid_group_axes(GridGroup g);
// Ranks in each group of kind `g`.
int grid_group_size(const GridShape& shape, GridGroup g);
// Where a group's ranks sit in the world rank order: for each axis it varies (X, Y, Z, data), the
// distance in world ranks between neighbours along it and the extent.
struct GridGroupSpan {
  int stride = 1;
  int extent = 1;
};
std::vector<GridGroupSpan> grid_group_spans(const GridShape& shape, GridGroup g);

// --- the mapping ---

// Parses --grid "GX,GY,GZ,GD" (commas or 'x' between the numbers), or the same by named degrees in the
// words of Megatron and torchtitan (docs/parallelism.md): "tp-x=2,tp-y=2,fsdp=4,dp=2" is 2,2,4,2; a degree
// left out is 1, and dp left out fills the ranks (tp-x=2 on 8 ranks: 2,1,1,4). An empty text means
// 1,1,1,world_size (pure data parallelism). Throws InvalidArgument on anything else.
GridShape parse_grid(std::string_view text, int world_size);
// Parses --grid-order: a permutation of x, y and z, fastest first, e.g. "z,x,y" (commas optional:
// "zxy"). Throws InvalidArgument on anything else.
GridOrder parse_grid_order(std::string_view text);
// "x,y,z".
std::string grid_order_str(const GridOrder& order);
// Throws InvalidArgument unless every extent is >= 1 and the product is world_size, e.g.
// "grid 2x2x2x1 = 8 ranks, but the job has 4; change --grid or mpirun -np".
void check_grid(const GridShape& shape, int world_size);
// Coordinates of world rank `rank`, 0 <= rank < shape.size().
GridCoords grid_coords(const GridShape& shape, int rank);
// World rank at `c`.
int grid_rank(const GridShape& shape, const GridCoords& c);
// World ranks of the group `g` that contains world rank `rank`, in the order of their rank in the
// group's communicator (ascending world rank).
std::vector<int> grid_group_members(const GridShape& shape, int rank, GridGroup g);
// This rank's index in its group `g` (its position in grid_group_members): its varying coordinates
// linearised X fastest, whatever the grid's order (the world group: the world rank).
int grid_group_rank(const GridShape& shape, int rank, GridGroup g);

// --- placement: which groups stay inside a node ---

// Node of each world rank when nodes hold `ranks_per_node` consecutive ranks (Slurm's block
// distribution, mpirun's --map-by slot): rank / ranks_per_node.
std::vector<int> block_nodes(int world_size, int ranks_per_node);
// The most nodes that any group of kind `g` spans, given each world rank's node (any labels): 1 when
// every such group lies inside one node.
int grid_group_nodes(const GridShape& shape, GridGroup g, const std::vector<int>& node_of_rank);
// "X inside nodes, Y across 2 nodes, Z across 2 nodes": X, Y, Z and data, those with more than one
// rank; "one node" when every rank shares one.
std::string grid_placement_str(const GridShape& shape, const std::vector<int>& node_of_rank);

// The orders of X, Y and Z that place this grid's groups differently: one per order of its axes of
// extent > 1 (AxoNN's x,y,z first), so 1, 2 or 6.
std::vector<GridOrder> distinct_orders(const GridShape& shape);

}  // namespace axonn::layout
