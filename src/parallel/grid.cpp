#include "axonn/parallel/grid.hpp"

#include "axonn/core/error.hpp"

namespace axonn::parallel {
namespace {

// The group's "color": the world rank of its member whose varying coordinates are all 0.
int group_color(const GridShape& s, const GridCoords& c, GridGroup g) {
  const layout::GridGroupAxes v = layout::grid_group_axes(g);
  return grid_rank(s, {v.x ? 0 : c.x, v.y ? 0 : c.y, v.z ? 0 : c.z, v.d ? 0 : c.d});
}

}  // namespace

Grid::Grid(const GridShape& shape, std::shared_ptr<comm::Communicator> world)
    : shape_(shape), world_(std::move(world)) {
  AXONN_CHECK(world_ != nullptr, "Grid needs a world communicator");
  check_grid(shape_, world_->size());  // before any communication: every rank throws alike
  const int r = world_->rank();
  coords_ = grid_coords(shape_, r);
  auto split = [&](GridGroup g) {
    auto c = world_->split(group_color(shape_, coords_, g), grid_group_rank(shape_, r, g),
                           std::string(grid_group_name(g)));
    AXONN_CHECK(c && c->rank() == grid_group_rank(shape_, r, g), "split of group ",
                grid_group_name(g), " gave an unexpected rank");
    return c;
  };
  // Every rank splits in this same order (splits are collective over world).
  x_ = split(GridGroup::kX);
  y_ = split(GridGroup::kY);
  z_ = split(GridGroup::kZ);
  z2_ = z_->dup(std::string(grid_group_name(GridGroup::kZ2)));
  xy_ = split(GridGroup::kXY);
  xyz_ = split(GridGroup::kXYZ);
  data_ = split(GridGroup::kData);
  zdata_ = split(GridGroup::kZData);
}

Grid::~Grid() = default;

comm::Communicator& Grid::group(GridGroup g) const {
  switch (g) {
    case GridGroup::kX: return *x_;
    case GridGroup::kY: return *y_;
    case GridGroup::kZ: return *z_;
    case GridGroup::kZ2: return *z2_;
    case GridGroup::kXY: return *xy_;
    case GridGroup::kXYZ: return *xyz_;
    case GridGroup::kData: return *data_;
    case GridGroup::kZData: return *zdata_;
    case GridGroup::kWorld: return *world_;
  }
  AXONN_CHECK(false, "unknown grid group ", static_cast<int>(g));
  return *world_;
}

std::string Grid::str() const {
  return ::axonn::detail::concat("grid ", shape_.str(), ", rank ", rank(), " at (x,y,z,d) = (",
                                 coords_.x, ",", coords_.y, ",", coords_.z, ",", coords_.d, ")");
}

}  // namespace axonn::parallel
