// parallel/layout.hpp — the tensor-parallel linear's blocks under their parallel:: names (a stable
// header of the installed package, docs/api.md). They are stated once, on the layout floor:
// layout/tp_linear.hpp.
#pragma once

#include "axonn/layout/tp_linear.hpp"

namespace axonn::parallel {

using layout::split_begin;
using layout::TpLinearLayout;
using layout::TpLinearSpec;

}  // namespace axonn::parallel
