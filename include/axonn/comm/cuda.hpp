// comm/cuda.hpp — the CUDA side of comm that needs no NCCL: device selection by node-local rank and
// the MPI-staged communicator for device buffers (built only with -DAXONN_CUDA=ON; link
// axonn_comm_cuda). No CUDA header is included here.
//
//   axonn::comm::Runtime mpi(&argc, &argv);
//   const int device = axonn::comm::select_device_by_local_rank();   // before any CUDA allocation
//   auto world = axonn::comm::world();
//   auto gpu = axonn::comm::staged_cuda_from(world);                   // or nccl_from(*world)
//   gpu->all_reduce(d_grad, n, DType::kF32);
#pragma once

#include <memory>

#include "axonn/comm/communicator.hpp"
#include "axonn/comm/staged.hpp"

namespace axonn::comm {

// Makes device (local_rank() % device count) current for the calling thread, logs which one (and a
// warning when several ranks of the node share a device: fine for the staged communicator, not for
// NCCL), and returns it. Throws CudaError, saying what to check, when this rank sees no device.
// Collective over MPI_COMM_WORLD the first time local_rank() is computed (see comm/runtime.hpp).
int select_device_by_local_rank();

// The StagingCopier of the current device: cudaMemcpyAsync on the kernels' compute stream
// (kernels::cuda_compute_stream()), pinned staging memory from cudaMallocHost, synchronize() =
// cudaStreamSynchronize of that stream. Bound to the device current when it is made.
std::shared_ptr<StagingCopier> cuda_copier();

// staged_from(host, cuda_copier()): device buffers on the current device, collectives through host
// memory and `host` (MPI). Several ranks may share one GPU.
std::shared_ptr<Communicator> staged_cuda_from(std::shared_ptr<Communicator> host);

}  // namespace axonn::comm
