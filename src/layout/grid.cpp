#include "axonn/layout/grid.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>

#include "axonn/core/error.hpp"

namespace axonn::layout {
GridGroupAxes grid_group_axes(GridGroup g) {
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

int grid_group_size(const GridShape& s, GridGroup g) {
  const GridGroupAxes v = grid_group_axes(g);
  return (v.x ? s.gx : 1) * (v.y ? s.gy : 1) * (v.z ? s.gz : 1) * (v.d ? s.gdata : 1);
}

std::vector<GridGroupSpan> grid_group_spans(const GridShape& s, GridGroup g) {
  const GridGroupAxes v = grid_group_axes(g);
  std::vector<GridGroupSpan> spans;
  if (v.x) spans.push_back({s.stride(GridAxis::kX), s.gx});
  if (v.y) spans.push_back({s.stride(GridAxis::kY), s.gy});
  if (v.z) spans.push_back({s.stride(GridAxis::kZ), s.gz});
  if (v.d) spans.push_back({s.tensor_parallel(), s.gdata});
  return spans;
}

int GridShape::stride(GridAxis a) const {
  int st = 1;
  for (GridAxis b : order) {
    if (b == a) return st;
    st *= extent(b);
  }
  AXONN_CHECK(false, "grid order ", grid_order_str(order), " lacks axis ", static_cast<int>(a));
  return 0;
}

std::vector<GridOrder> distinct_orders(const GridShape& s) {
  // every permutation, AxoNN's first; one per order of the axes of extent > 1
  std::vector<GridOrder> out;
  std::vector<std::vector<GridAxis>> seen;
  GridOrder o = kAxonnGridOrder;
  do {
    std::vector<GridAxis> effective;
    for (GridAxis a : o)
      if (s.extent(a) > 1) effective.push_back(a);
    if (std::find(seen.begin(), seen.end(), effective) != seen.end()) continue;
    seen.push_back(effective);
    out.push_back(o);
  } while (std::next_permutation(o.begin(), o.end()));
  return out;
}

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

namespace {

// --grid by named degrees, "tp-x=2,tp-y=2,fsdp=4,dp=2" (any order; a name left out is 1, but dp, which is
// left out fills the ranks the others leave): the same grid as "2,2,4,2".
GridShape parse_named_grid(std::string_view text, int world_size) {
  constexpr std::string_view kHelp = "--grid by named degrees wants tp-x=N (X), tp-y=N (Y), fsdp=N (Z), dp=N (data), "
                                     "comma-separated, each at most once (e.g. tp-x=2,fsdp=2); got '";
  static constexpr std::string_view kNames[4] = {"tp-x", "tp-y", "fsdp", "dp"};
  int v[4] = {0, 0, 0, 0};
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq == std::string_view::npos ? item.size() : eq);
    const auto* known = std::find(std::begin(kNames), std::end(kNames), name);
    int value = 0;
    const char* digits = eq == std::string_view::npos ? item.data() + item.size() : item.data() + eq + 1;
    const auto [end, ec] = std::from_chars(digits, item.data() + item.size(), value);
    AXONN_CHECK_ARG(known != std::end(kNames) && eq != std::string_view::npos && ec == std::errc() &&
                        end == item.data() + item.size() && value >= 1,
                    kHelp, text, "': '", item, "' is not a name and a positive number");
    int& slot = v[known - std::begin(kNames)];
    AXONN_CHECK_ARG(slot == 0, kHelp, text, "': ", name, " is named twice");
    slot = value;
    at = comma + 1;
  }
  const int model_ranks = std::max(1, v[0]) * std::max(1, v[1]) * std::max(1, v[2]);
  if (v[3] == 0) {
    AXONN_CHECK_ARG(world_size % model_ranks == 0, "--grid ", text, ": tp-x * tp-y * fsdp = ", model_ranks,
                    " does not divide the job's ", world_size, " ranks, so dp cannot fill them; change the degrees "
                    "or mpirun -np");
    v[3] = world_size / model_ranks;
  }
  return {std::max(1, v[0]), std::max(1, v[1]), std::max(1, v[2]), v[3]};
}

}  // namespace

GridShape parse_grid(std::string_view text, int world_size) {
  if (text.empty()) return {1, 1, 1, world_size};
  if (text.find('=') != std::string_view::npos) return parse_named_grid(text, world_size);
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
  const GridGroupAxes v = grid_group_axes(g);
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
  const GridGroupAxes v = grid_group_axes(g);
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

}  // namespace axonn::layout
