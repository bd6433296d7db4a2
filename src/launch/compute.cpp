// launch/compute.cpp — kernel backend, GPU selection and the grid's communicator for a run.
#include "axonn/launch/compute.hpp"

#include "axonn/core/error.hpp"
#include "axonn/core/host.hpp"
#include "axonn/core/log.hpp"
#include "axonn/kernels/gemm.hpp"

#include "axonn/comm/runtime.hpp"
#if defined(AXONN_HAVE_CUDA)
#include "axonn/comm/cuda.hpp"
#include "axonn/kernels/cuda.hpp"
#endif
#if defined(AXONN_HAVE_NCCL)
#include "axonn/comm/nccl.hpp"
#endif

namespace axonn::launch {

namespace {
#if defined(AXONN_HAVE_NCCL)
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif
// The MPI-staged communicator's CUDA copier is in axonn_comm_cuda, built with the CUDA backend.
#if defined(AXONN_HAVE_CUDA)
constexpr bool kHaveStaged = true;
#else
constexpr bool kHaveStaged = false;
#endif
}  // namespace

void fit_threads_to_cpus() {
  const int threads = kernels::cpu_threads(), cpus = cpus_allowed();
  if (cpus <= 0 || threads <= cpus) return;
  kernels::set_cpu_threads(cpus);
  log_warn("threads   %d threads were asked for (OMP_NUM_THREADS) but this rank may run on %d CPU%s (its affinity: "
           "the launcher bound it), so it uses %d: more would share cores and run slower. To give each rank its "
           "cores: mpirun --bind-to none, or --map-by slot:PE=%d (Open MPI binds a rank to one core when it starts "
           "at most 2); srun --cpus-per-task=%d (docs/performance.md)",
           threads, cpus, cpus > 1 ? "s" : "", cpus, threads, threads);
}

std::string default_comm(kernels::Backend backend) {
  if (backend != kernels::Backend::kCuda) return "mpi";
  if (kHaveNccl) return "nccl";
  if (kHaveStaged) return "mpi-staged";
  return "mpi";
}

Compute setup_compute(const std::string& kernels_name, const std::string& comm_name,
                      std::shared_ptr<comm::Communicator> world) {
  return setup_compute(kernels::parse_backend(kernels_name), comm_name, std::move(world));
}

Compute setup_compute(kernels::Backend backend, const std::string& comm_name,
                      std::shared_ptr<comm::Communicator> world) {
  Compute c;
  c.backend = backend;
  c.comm = comm_name.empty() ? default_comm(c.backend) : comm_name;
  AXONN_CHECK_ARG(c.comm == "mpi" || c.comm == "nccl" || c.comm == "mpi-staged", "unknown --comm '", c.comm,
                  "'; use mpi, nccl or mpi-staged");
  const bool cuda = c.backend == kernels::Backend::kCuda;
  AXONN_CHECK_ARG(cuda || c.comm == "mpi", "--comm ", c.comm, " moves device buffers; with --kernels ",
                  kernels::backend_name(backend), " the buffers are host memory: use --comm mpi (or --kernels cuda)");
  // Every rank sees the same flags, so these checks agree without communication.
  if (cuda) {
#if defined(AXONN_HAVE_CUDA)
    c.device = kernels::cuda_setup(comm::local_rank());  // device by node-local rank
    c.device_name = kernels::cuda_device_name();
#else
    throw InvalidArgument("--kernels cuda: this build has no CUDA backend; rebuild with -DAXONN_CUDA=ON "
                          "(cmake --preset cuda-release), or use --kernels cpu");
#endif
  }
  if (c.comm == "mpi") {
    // One rank never communicates device buffers (every group has size 1), so the MPI world serves.
    AXONN_CHECK_ARG(!cuda || world->size() == 1, "--kernels cuda with --comm mpi on ", world->size(),
                    " ranks: MPI would get device buffers; use --comm nccl (one GPU per rank) or --comm "
                    "mpi-staged (several ranks may share a GPU)");
    c.grid_world = std::move(world);
  } else if (c.comm == "nccl") {
#if defined(AXONN_HAVE_NCCL)
    c.grid_world = comm::nccl_from(*world);
#else
    throw InvalidArgument("--comm nccl: this build has no NCCL communicator (configure with -DAXONN_CUDA=ON and "
                          "NCCL installed, or set NCCL_ROOT); use --comm mpi-staged or --comm mpi");
#endif
  } else {
#if defined(AXONN_HAVE_CUDA)
    c.grid_world = comm::staged_cuda_from(world);  // device buffers through pinned host memory and MPI
#else
    throw InvalidArgument("--comm mpi-staged moves device buffers: this build has no CUDA backend; rebuild "
                          "with -DAXONN_CUDA=ON, or use --comm mpi with the CPU kernels");
#endif
  }
  return c;
}

double measure_gpu_bf16_tflops(int n, int reps) {
#if defined(AXONN_HAVE_CUDA)
  return kernels::cuda_measure_bf16_gemm_tflops(n, reps);
#else
  (void)n;
  (void)reps;
  throw InvalidArgument("measuring the GPU's bf16 GEMM peak needs a build with -DAXONN_CUDA=ON");
#endif
}

}  // namespace axonn::launch
