#include "axonn/parallel/grid.hpp"

#include <charconv>
#include <cstdint>

#include "axonn/core/error.hpp"

namespace axonn::parallel {
namespace {

// Which coordinates a group varies (the others are fixed).
struct Varies {
  bool x, y, z, d;
};
Varies varies(GridGroup g) {
  switch (g) {
    case GridGroup::kX: return {true, false, false, false};
    case GridGroup::kY: return {false, true, false, false};
    case GridGroup::kZ:
    case GridGroup::kZ2: return {false, false, true, false};
    case GridGroup::kXY: return {true, true, false, false};
    case GridGroup::kXYZ: return {true, true, true, false};
    case GridGroup::kData: return {false, false, false, true};
    case GridGroup::kZData: return {false, false, true, true};
    case GridGroup::kWorld: return {true, true, true, true};
  }
  AXONN_CHECK(false, "unknown grid group ", static_cast<int>(g));
  return {};
}

// The group's "color": the world rank of its member whose varying coordinates are all 0.
int group_color(const GridShape& s, const GridCoords& c, GridGroup g) {
  const Varies v = varies(g);
  return grid_rank(s, {v.x ? 0 : c.x, v.y ? 0 : c.y, v.z ? 0 : c.z, v.d ? 0 : c.d});
}

}  // namespace

std::string GridShape::str() const {
  return ::axonn::detail::concat(gx, "x", gy, "x", gz, "x", gdata);
}

std::string_view grid_group_name(GridGroup g) {
  switch (g) {
    case GridGroup::kX: return "x";
    case GridGroup::kY: return "y";
    case GridGroup::kZ: return "z";
    case GridGroup::kZ2: return "z2";
    case GridGroup::kXY: return "xy";
    case GridGroup::kXYZ: return "xyz";
    case GridGroup::kData: return "data";
    case GridGroup::kZData: return "zdata";
    case GridGroup::kWorld: return "world";
  }
  return "?";
}

GridShape parse_grid(std::string_view text, int world_size) {
  if (text.empty()) return {1, 1, 1, world_size};
  int v[4] = {0, 0, 0, 0};
  size_t n = 0;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  bool ok = true;
  while (ok && n < 4) {
    auto [next, ec] = std::from_chars(p, end, v[n]);
    ok = ec == std::errc() && v[n] >= 1;
    ++n;
    p = next;
    if (p == end) break;
    ok = ok && (*p == ',' || *p == 'x') && n < 4;
    ++p;
  }
  AXONN_CHECK_ARG(ok && n == 4 && p == end, "--grid wants four positive integers GX,GY,GZ,GD "
                  "(e.g. 2,2,1,2; product = number of ranks), got '", text, "'");
  return {v[0], v[1], v[2], v[3]};
}

void check_grid(const GridShape& s, int world_size) {
  AXONN_CHECK_ARG(s.gx >= 1 && s.gy >= 1 && s.gz >= 1 && s.gdata >= 1, "grid ", s.str(),
                  ": every extent must be at least 1");
  const int64_t n = int64_t{s.gx} * s.gy * s.gz * s.gdata;
  AXONN_CHECK_ARG(n == world_size, "grid ", s.str(), " = ", n, " ranks, but the job has ",
                  world_size, "; change --grid or mpirun -np");
}

GridCoords grid_coords(const GridShape& s, int rank) {
  AXONN_CHECK(rank >= 0 && rank < s.size(), "rank ", rank, " is outside grid ", s.str());
  const int intra = rank % (s.gx * s.gy * s.gz);
  return {intra % s.gx, (intra / s.gx) % s.gy, intra / (s.gx * s.gy), rank / (s.gx * s.gy * s.gz)};
}

int grid_rank(const GridShape& s, const GridCoords& c) {
  return ((c.d * s.gz + c.z) * s.gy + c.y) * s.gx + c.x;
}

std::vector<int> grid_group_members(const GridShape& s, int rank, GridGroup g) {
  const int color = group_color(s, grid_coords(s, rank), g);
  // Ascending world rank is ascending group rank: both linearise with X fastest.
  std::vector<int> members;
  for (int r = 0; r < s.size(); ++r)
    if (group_color(s, grid_coords(s, r), g) == color) members.push_back(r);
  return members;
}

int grid_group_rank(const GridShape& s, int rank, GridGroup g) {
  const GridCoords c = grid_coords(s, rank);
  const Varies v = varies(g);
  // Linearise the varying coordinates, X fastest.
  int key = 0, stride = 1;
  if (v.x) key += c.x * stride, stride *= s.gx;
  if (v.y) key += c.y * stride, stride *= s.gy;
  if (v.z) key += c.z * stride, stride *= s.gz;
  if (v.d) key += c.d * stride;
  return key;
}

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
