// launch/compute.hpp — where a run computes and communicates: the kernel backend (cpu, ref, cuda),
// the GPU it uses (selected by node-local rank), and the communicator its grid is built from
// (--comm mpi | nccl | mpi-staged). Shared by `axonn train`, bench/gpt2_step and the inference
// set-up (infer/setup.hpp: `generate`, `memorization`, bench_generate).
//
//   auto world = comm::world();
//   launch::Compute cc = launch::setup_compute("cuda", "", world);   // device, then NCCL over world
//   parallel::Grid grid(shape, cc.grid_world);
//   model::Gpt gpt(cfg, grid, B, T, cc.backend);
#pragma once

#include <memory>
#include <string>

#include "axonn/comm/communicator.hpp"
#include "axonn/kernels/ops.hpp"

namespace axonn::launch {

struct Compute {
  kernels::Backend backend = kernels::Backend::kCpu;
  std::string comm = "mpi";                       // the communicator actually used
  std::shared_ptr<comm::Communicator> grid_world;  // what the Grid splits (takes the kernels' memory)
  int device = -1;                                 // the CUDA device (kCuda), else -1
  std::string device_name;                         // e.g. "NVIDIA H100 ... (device 0, sm_90, 79 GiB)"
};

// A rank's CPU threads on the CPUs it may run on: more threads than its affinity allows are cut to
// that many, with a warning that names the launcher flags that give a rank its cores. Open MPI's
// mpirun binds each rank to one core when it starts at most 2, and two threads on one core made
// `axonn train` half as fast as its own benchmark (issue 36: 11.2 s a step against 4.8 s). The MFU
// peak is then timed with the threads the steps use. The trainer (train::Session) and bench_gpt2_step call
// it for the CPU backends; generation measures its decode threads as it runs instead (infer/decode_threads.hpp).
void fit_threads_to_cpus();

// The default --comm for a backend: mpi for cpu/ref; for cuda nccl when built with it, else mpi-staged
// when built with it, else mpi.
std::string default_comm(kernels::Backend backend);

// Parses --kernels and --comm (empty: default_comm), sets the GPU up for cuda (device node-local rank
// % devices; registers device memory and the cuda kernels) and builds the grid's world communicator
// over `world` (the MPI world). Collective over world for cuda (local rank; NCCL bootstrap).
// InvalidArgument for a combination this build or this job cannot run, saying what to change:
// cuda in a build without CUDA, nccl without NCCL or without cuda, mpi with cuda on several ranks
// (MPI gets host buffers; the GPU's are device memory).
Compute setup_compute(kernels::Backend backend, const std::string& comm, std::shared_ptr<comm::Communicator> world);
// The same with --kernels' text (parsed here).
Compute setup_compute(const std::string& kernels, const std::string& comm, std::shared_ptr<comm::Communicator> world);

// The dense bf16 GEMM rate of the current GPU in TFLOP/s (cuBLAS, bf16 inputs, fp32 accumulation,
// n^3, best of reps), measured now: the MFU denominator on the GPU. Throws without CUDA.
double measure_gpu_bf16_tflops(int n = 8192, int reps = 5);

}  // namespace axonn::launch
