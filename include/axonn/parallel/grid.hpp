// parallel/grid.hpp — AxoNN's 4D process grid's communicators.
//
// The geometry (shape, rank order, coordinates, which ranks form each group, node placement) is
// layout/grid.hpp's, without MPI; its names are used here as parallel:: names too. A Grid splits the
// world communicator into one communicator per group of this rank: X, Y, Z, a second Z (same ranks,
// independent communicator, for the weight all-gathers so they never queue behind the
// reduce-scatters on Z), X·Y (vocabulary-parallel embedding and loss), X·Y·Z (one model replica:
// gradient-norm reductions), data, Z·data (every rank that saw other tokens: the gradient sum of
// tensors replicated over Z). This rank's index in a group's communicator is its index in the group
// (layout::grid_group_rank: x().rank() == coords().x, xy().rank() == y*Gx + x).
//
// No globals: build one Grid after MPI is up and pass it to whoever communicates.
//
//   auto world = axonn::comm::world();
//   auto shape = axonn::parallel::parse_grid(grid_flag, world->size());   // "2,2,1,1" or ""
//   axonn::parallel::Grid grid(shape, world);        // throws InvalidArgument if sizes disagree
//   grid.x().all_reduce(y, n, DType::kF32);           // over X
#pragma once

#include <memory>
#include <string>

#include "axonn/comm/communicator.hpp"
#include "axonn/layout/grid.hpp"

namespace axonn::parallel {

// The geometry, one definition (layout/grid.hpp).
using layout::GridAxis;
using layout::GridOrder;
using layout::kAxonnGridOrder;
using layout::GridShape;
using layout::GridCoords;
using layout::GridGroup;
using layout::kAllGridGroups;
using layout::grid_group_name;
using layout::parse_grid;
using layout::parse_grid_order;
using layout::grid_order_str;
using layout::check_grid;
using layout::grid_coords;
using layout::grid_rank;
using layout::grid_group_members;
using layout::grid_group_rank;
using layout::block_nodes;
using layout::grid_group_nodes;
using layout::grid_placement_str;

// --- the communicators ---

class Grid {
 public:
  // Checks the shape against world->size() (throws InvalidArgument before any communication),
  // then splits `world` into every group. Collective over world.
  Grid(const GridShape& shape, std::shared_ptr<comm::Communicator> world);
  Grid(const Grid&) = delete;
  Grid& operator=(const Grid&) = delete;
  ~Grid();

  const GridShape& shape() const { return shape_; }
  const GridCoords& coords() const { return coords_; }
  int rank() const { return world_->rank(); }

  comm::Communicator& x() const { return *x_; }
  comm::Communicator& y() const { return *y_; }
  comm::Communicator& z() const { return *z_; }
  // Same ranks as z(), independent communicator: weight all-gathers go here, reduce-scatters on z().
  comm::Communicator& z2() const { return *z2_; }
  comm::Communicator& xy() const { return *xy_; }
  comm::Communicator& xyz() const { return *xyz_; }
  comm::Communicator& data() const { return *data_; }
  // Z·data: the ranks of one (x, y) position, which saw different tokens.
  comm::Communicator& zdata() const { return *zdata_; }
  comm::Communicator& world() const { return *world_; }
  comm::Communicator& group(GridGroup g) const;

  // "grid 2x2x2x2, rank 13 at (x,y,z,d) = (1,0,1,1)".
  std::string str() const;

 private:
  GridShape shape_;
  GridCoords coords_;
  std::shared_ptr<comm::Communicator> world_;
  std::unique_ptr<comm::Communicator> x_, y_, z_, z2_, xy_, xyz_, data_, zdata_;
};

}  // namespace axonn::parallel
