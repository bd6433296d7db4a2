// Every 4D grid of n ranks: the shapes the parity tests run (include "common/grid_shapes.hpp").
#pragma once

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

}  // namespace axonn::test
