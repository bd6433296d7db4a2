// comm/reduce_kernels.hpp — element-wise pieces of reductions that MPI lacks (backend-independent).
//
// bf16: MPI has no bf16 type, so the MPI backend sums bf16 with a user-defined operation built on
// these loops: widen both operands to fp32, combine, round to nearest even once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "axonn/core/dtype.hpp"

namespace axonn::comm::detail {

// inout[i] = bf16(f32(in[i]) + f32(inout[i])), rounded to nearest even.
void bf16_sum(const uint16_t* in, uint16_t* inout, size_t n);
// inout[i] = the larger of in[i] and inout[i] (compared as fp32; a NaN in either gives NaN).
void bf16_max(const uint16_t* in, uint16_t* inout, size_t n);
// kAvg's second half: buf[i] /= divisor, for fp32 and bf16 (bf16 divided in fp32, rounded once).
void divide_in_place(void* buf, size_t count, DType dtype, int divisor);

}  // namespace axonn::comm::detail
