// comm/runtime.hpp — the MPI process lifetime.
//
// Every axonn program runs under MPI, even on one rank: started by mpirun/srun, or alone (MPI's
// singleton init). Construct one Runtime at the top of main(); it initialises MPI and finalises it
// when destroyed. Nothing here exposes <mpi.h>.
//
//   int main(int argc, char** argv) {
//     axonn::comm::Runtime mpi(&argc, &argv);
//     ...
//   }
#pragma once

#include <string>

namespace axonn::comm {

// This rank's index among the ranks of the job on the same node (shared-memory domain, from
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), and how many ranks that node has: what picks a GPU
// per rank (comm/cuda.hpp: select_device_by_local_rank). Computed once: by Runtime's constructor, or,
// if MPI was initialised without a Runtime (test mains), by the first call, which is then collective
// over MPI_COMM_WORLD (every rank must make it). Before MPI is initialised: 0 and 1.
int local_rank();
int local_size();

// This process's rank as its launcher announced it in the environment, for use before MPI is
// initialised (axonn parses its command line first, so that --help and flag errors need no MPI):
// OMPI_COMM_WORLD_RANK (mpirun), PMIX_RANK (srun with PMIx), PMI_RANK (MPICH, Intel MPI), then
// SLURM_PROCID; 0 when none is set (a process started alone).
int launcher_rank();

// The MPI library's version (the first line of MPI_Get_library_version, e.g. "Open MPI v4.1.4, ...").
std::string mpi_library_version();

class Runtime {
 public:
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int world_rank() const { return rank_; }
  int world_size() const { return size_; }
  // The thread level MPI granted (MPI_THREAD_* value).
  int thread_level() const { return thread_level_; }

  // Size of MPI_COMM_WORLD (1 before MPI is initialised).
  static int process_world_size();

  // True when every rank of the job calls this within `seconds` (a non-blocking barrier on the
  // world, polled): after an error, it tells whether every rank met it (then each can leave on its
  // own, quietly) or some rank is elsewhere, perhaps blocked in a collective (then abort).
  static bool all_ranks_arrive_within(double seconds);

  // Brings every rank down (MPI_Abort on the world) after a fatal error on any one of them.
  [[noreturn]] static void abort(int exit_code);
  // Ends this rank normally with exit_code; for errors that every rank detects alike (bad flags),
  // so each rank leaves on its own without MPI_Abort.
  [[noreturn]] static void exit(int exit_code);

 private:
  int rank_ = 0;
  int size_ = 1;
  int thread_level_ = 0;
};

}  // namespace axonn::comm
