#include "axonn/parallel/layout.hpp"

#include "axonn/core/error.hpp"

namespace axonn::parallel {

TpLinearLayout::TpLinearLayout(const TpLinearSpec& s, const GridShape& shape, const GridCoords& c, const char* name)
    : spec(s) {
  const int g_in = s.transposed ? shape.gy : shape.gx;
  const int g_out = s.transposed ? shape.gx : shape.gy;
  const char* in_axis = s.transposed ? "Gy" : "Gx";
  const char* out_axis = s.transposed ? "Gx" : "Gy";
  AXONN_CHECK_ARG(s.in > 0 && s.out > 0 && s.out_parts > 0 && s.out % s.out_parts == 0, "layer ", name,
                  ": bad shape ", s.out, "x", s.in);
  AXONN_CHECK_ARG(s.in % g_in == 0, "layer ", name, ": its ", s.in, " input features are not divisible by ", in_axis,
                  "=", g_in, "; choose a grid whose ", in_axis, " divides ", s.in);
  AXONN_CHECK_ARG((s.out / s.out_parts) % g_out == 0, "layer ", name, ": its ", s.out / s.out_parts,
                  " output features", s.out_parts > 1 ? " per part" : "", " are not divisible by ", out_axis, "=",
                  g_out, "; choose a grid whose ", out_axis, " divides ", s.out / s.out_parts);
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
  const int part_rows = out_local / spec.out_parts;          // rows of one part in this block
  const int64_t part_size = spec.out / spec.out_parts;       // rows of one part in the full matrix
  const int p = r / part_rows, within = r % part_rows;
  return p * part_size + static_cast<int64_t>(out_block) * part_rows + within;
}

}  // namespace axonn::parallel
