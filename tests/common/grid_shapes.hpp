// Every 4D grid of n ranks: the shapes the parity tests run (include "common/grid_shapes.hpp").
#pragma once

#include <string>
#include <vector>

#include "axonn/parallel/grid.hpp"

namespace axonn::test {

// All (Gx, Gy, Gz, Gdata) with Gx*Gy*Gz*Gdata = n, X fastest.
inline std::vector<parallel::GridShape> grid_shapes(int n) {
  std::vector<parallel::GridShape> out;
  for (int gx = 1; gx <= n; ++gx)
    for (int gy = 1; gx * gy <= n; ++gy)
      for (int gz = 1; gx * gy * gz <= n; ++gz)
        if (n % (gx * gy * gz) == 0) out.push_back({gx, gy, gz, n / (gx * gy * gz)});
  return out;
}

// "GX,GY,GZ,GD": the grid as `axonn train --grid` takes it.
inline std::string grid_text(const parallel::GridShape& s) {
  return std::to_string(s.gx) + "," + std::to_string(s.gy) + "," + std::to_string(s.gz) + "," + std::to_string(s.gdata);
}

// gpt2-tiny's 4 heads and 64 channels, B = 4: the grids of n ranks the model and batch admit.
inline std::vector<parallel::GridShape> tiny_gpt2_grids(int n) {
  std::vector<parallel::GridShape> out;
  for (const auto& s : grid_shapes(n))
    if (64 % s.gx == 0 && 4 % s.gy == 0 && 4 % (s.gz * s.gdata) == 0) out.push_back(s);
  return out;
}

}  // namespace axonn::test
