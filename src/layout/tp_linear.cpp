#include "axonn/layout/tp_linear.hpp"

#include "axonn/core/error.hpp"

namespace axonn::layout {

TpLinearLayout::TpLinearLayout(const TpLinearSpec& s, const GridShape& shape, const GridCoords& c, const char* name)
    : spec(s) {
  const int g_in = s.transposed ? shape.gy : shape.gx;
  const int g_out = s.transposed ? shape.gx : shape.gy;
  const char* in_axis = s.transposed ? "Gy" : "Gx";
  const char* out_axis = s.transposed ? "Gx" : "Gy";
  int64_t sum = 0;
  for (int rows : s.parts()) {
    AXONN_CHECK_ARG(rows > 0, "layer ", name, ": an output part of ", rows, " rows");
    sum += rows;
  }
  AXONN_CHECK_ARG(s.in > 0 && s.out > 0 && sum == s.out, "layer ", name, ": bad shape ", s.out, "x", s.in,
                  " (its output parts have ", sum, " rows)");
  AXONN_CHECK_ARG(s.in % g_in == 0, "layer ", name, ": its ", s.in, " input features are not divisible by ", in_axis,
                  "=", g_in, "; choose a grid whose ", in_axis, " divides ", s.in);
  const bool several = s.parts().size() > 1;
  for (int rows : s.parts()) {
    AXONN_CHECK_ARG(rows % g_out == 0, "layer ", name, ": its ", rows, " output features", several ? " of a part" : "",
                    " are not divisible by ", out_axis, "=", g_out, "; choose a grid whose ", out_axis, " divides ",
                    rows);
    part_rows.push_back(rows / g_out);
  }
  in_local = s.in / g_in;
  out_local = s.out / g_out;
  in_block = s.transposed ? c.y : c.x;
  out_block = s.transposed ? c.x : c.y;
  block_size = static_cast<int64_t>(out_local) * in_local;
  AXONN_CHECK_ARG(block_size % shape.gz == 0, "layer ", name, ": its weight block of ", out_local, "x", in_local,
                  " = ", block_size, " elements per (x, y) is not divisible by Gz=", shape.gz,
                  "; choose a Gz that divides ", block_size);
  shard_size = block_size / shape.gz;
  shard_offset = c.z * shard_size;
}

int64_t TpLinearLayout::out_row(int r) const {
  // this rank's block is [part 0's rows | part 1's | ...]; part p's begin at row `full` of W
  int64_t full = 0;
  const std::vector<int> parts = spec.parts();
  for (size_t p = 0; p < parts.size(); p++) {
    if (r < part_rows[p]) return full + static_cast<int64_t>(out_block) * part_rows[p] + r;
    r -= part_rows[p];
    full += parts[p];
  }
  AXONN_CHECK(false, "output row beyond the block");
  return 0;
}

int TpLinearLayout::part_run(int r) const {
  for (int rows : part_rows) {
    if (r < rows) return rows - r;
    r -= rows;
  }
  return 1;
}

}  // namespace axonn::layout
