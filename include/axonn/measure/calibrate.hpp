// measure/calibrate.hpp — measuring this allocation for the planner's machine profile (`axonn calibrate`).
//
// Measures, with every rank at once (as in a training step): the sgemm rate of the CPU GEMM backend
// with the current threads, on square and transformer-like shapes; the memory bandwidth per rank
// that the memory-bound kernels reach (the AdamW update's); the cost of a collective between
// computations; and all-reduce, all-gather and reduce-scatter at every position a 4D grid of this job
// can put a group in — p ranks spaced ip apart, ip·p dividing the job, all such groups at once — over
// a sweep of message sizes. The planner's part (planner/calibration.hpp, no MPI) fits the cost model's
// parameters to these samples and writes the profile; docs/perf-model.md §4.1 maps every field.
//
//   kernels::set_gemm_backend(...);
//   planner::Calibration c = measure::calibrate(*world, /*quick=*/false);   // rank 0 prints a table
//   std::string json = planner::calibration_profile_json(c);
#pragma once

#include "axonn/comm/communicator.hpp"
#include "axonn/planner/calibration.hpp"

namespace axonn::measure {

// Collective over world. `quick`: fewer sizes and repetitions (a rough profile in seconds). Every
// rank returns the same measurements; rank 0 prints them as it goes.
planner::Calibration calibrate(comm::Communicator& world, bool quick);

}  // namespace axonn::measure
