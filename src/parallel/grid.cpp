#include "axonn/parallel/grid.hpp"

#include <algorithm>
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
  const std::string extents = ::axonn::detail::concat(gx, "x", gy, "x", gz, "x", gdata);
  return order == kAxonnGridOrder ? extents : extents + " order " + grid_order_str(order);
}

GridOrder parse_grid_order(std::string_view text) {
  // "x,y,z" or "xyz"
  std::string letters(text);
  if (text.size() == 5 && text[1] == ',' && text[3] == ',') letters = {text[0], text[2], text[4]};
  GridOrder order{};
  bool ok = letters.size() == 3;
  bool seen[3] = {false, false, false};
  for (size_t i = 0; ok && i < 3; ++i) {
    const int a = letters[i] == 'x' ? 0 : letters[i] == 'y' ? 1 : letters[i] == 'z' ? 2 : -1;
    ok = a >= 0 && !seen[a];
    if (ok) seen[a] = true, order[i] = static_cast<GridAxis>(a);
  }
  AXONN_CHECK_ARG(ok, "--grid-order wants x, y and z once each, fastest first (e.g. x,y,z, the default, or z,x,y), "
                  "got '", text, "'");
  return order;
}

std::string grid_order_str(const GridOrder& order) {
  std::string out;
  for (GridAxis a : order) out += std::string(out.empty() ? "" : ",") + "xyz"[static_cast<int>(a)];
  return out;
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
  const int replica = s.gx * s.gy * s.gz;
  int intra = rank % replica;
  int xyz[3] = {0, 0, 0};
  for (GridAxis a : s.order) {  // fastest first
    const int n = s.extent(a);
    xyz[static_cast<int>(a)] = intra % n;
    intra /= n;
  }
  return {xyz[0], xyz[1], xyz[2], rank / replica};
}

int grid_rank(const GridShape& s, const GridCoords& c) {
  const int xyz[3] = {c.x, c.y, c.z};
  int intra = 0;
  for (int i = 2; i >= 0; --i) {  // slowest first
    const GridAxis a = s.order[static_cast<size_t>(i)];
    intra = intra * s.extent(a) + xyz[static_cast<int>(a)];
  }
  return c.d * (s.gx * s.gy * s.gz) + intra;
}

std::vector<int> grid_group_members(const GridShape& s, int rank, GridGroup g) {
  const GridCoords c = grid_coords(s, rank);
  if (g == GridGroup::kWorld) {  // the world communicator itself: world rank order
    std::vector<int> all(static_cast<size_t>(s.size()));
    for (int r = 0; r < s.size(); ++r) all[static_cast<size_t>(r)] = r;
    return all;
  }
  const Varies v = varies(g);
  // The group's coordinates in group-rank order: its varying coordinates, X fastest.
  std::vector<int> members;
  for (int d = 0; d < (v.d ? s.gdata : 1); ++d)
    for (int z = 0; z < (v.z ? s.gz : 1); ++z)
      for (int y = 0; y < (v.y ? s.gy : 1); ++y)
        for (int x = 0; x < (v.x ? s.gx : 1); ++x)
          members.push_back(grid_rank(s, {v.x ? x : c.x, v.y ? y : c.y, v.z ? z : c.z, v.d ? d : c.d}));
  return members;
}

int grid_group_rank(const GridShape& s, int rank, GridGroup g) {
  const GridCoords c = grid_coords(s, rank);
  if (g == GridGroup::kWorld) return rank;
  const Varies v = varies(g);
  // Linearise the varying coordinates, X fastest.
  int key = 0, stride = 1;
  if (v.x) key += c.x * stride, stride *= s.gx;
  if (v.y) key += c.y * stride, stride *= s.gy;
  if (v.z) key += c.z * stride, stride *= s.gz;
  if (v.d) key += c.d * stride;
  return key;
}

std::vector<int> block_nodes(int world_size, int ranks_per_node) {
  AXONN_CHECK_ARG(ranks_per_node >= 1, "ranks per node must be >= 1, got ", ranks_per_node);
  std::vector<int> node(static_cast<size_t>(world_size));
  for (int r = 0; r < world_size; ++r) node[static_cast<size_t>(r)] = r / ranks_per_node;
  return node;
}

int grid_group_nodes(const GridShape& s, GridGroup g, const std::vector<int>& node_of_rank) {
  AXONN_CHECK(static_cast<int>(node_of_rank.size()) == s.size(), "grid ", s.str(), " has ", s.size(),
              " ranks, but ", node_of_rank.size(), " nodes were given");
  int most = 0;
  for (int r = 0; r < s.size(); ++r) {
    if (grid_group_rank(s, r, g) != 0) continue;  // each group once, from its first member
    std::vector<int> nodes;
    for (int m : grid_group_members(s, r, g)) nodes.push_back(node_of_rank[static_cast<size_t>(m)]);
    std::sort(nodes.begin(), nodes.end());
    most = std::max(most, static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin()));
  }
  return most;
}

std::string grid_placement_str(const GridShape& s, const std::vector<int>& node_of_rank) {
  if (grid_group_nodes(s, GridGroup::kWorld, node_of_rank) == 1) return "one node";
  std::string out;
  const std::pair<GridGroup, const char*> axes[] = {
      {GridGroup::kX, "X"}, {GridGroup::kY, "Y"}, {GridGroup::kZ, "Z"}, {GridGroup::kData, "data"}};
  for (const auto& [g, name] : axes) {
    if (grid_group_members(s, 0, g).size() < 2) continue;
    const int n = grid_group_nodes(s, g, node_of_rank);
    out += ::axonn::detail::concat(out.empty() ? "" : ", ", name,
                                   n == 1 ? " inside nodes" : ::axonn::detail::concat(" across ", n, " nodes"));
  }
  return out;
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
