#include "axonn/comm/runtime.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "mpi_error.hpp"

namespace axonn::comm {
namespace {

struct NodeRanks {
  bool known = false;
  int rank = 0;
  int size = 1;
};

// The node-local rank and size, split off the world once (collective over the world) and cached.
NodeRanks node_ranks() {
  static std::mutex mu;
  static NodeRanks cached;
  std::lock_guard lock(mu);
  if (cached.known) return cached;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return NodeRanks{};  // one process alone; not cached
  MPI_Comm node = MPI_COMM_NULL;
  int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(node, &cached.rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(node, &cached.size);
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  if (rc != MPI_SUCCESS)
    throw detail::mpi_error(rc, "MPI_Comm_split_type", "finding the node-local rank (MPI_COMM_TYPE_SHARED)");
  cached.known = true;
  return cached;
}

}  // namespace

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0 && rank <= INT32_MAX) return static_cast<int>(rank);
  }
  return 0;
}

int local_rank() { return node_ranks().rank; }
int local_size() { return node_ranks().size; }

Runtime::Runtime(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  AXONN_CHECK(!initialized, "MPI is already initialised: construct one comm::Runtime per process");
  // Open MPI's non-blocking all-reduce (libnbc) picks a binomial tree whenever the buffer is in
  // place or the group has fewer than 4 ranks, which is always the case for us: it costs 5x the
  // time of a reduce-scatter + all-gather on 16 MiB over 2 ranks here, half of it inside the
  // MPI_Iallreduce call itself (docs/comm.md). Ask for Rabenseifner's algorithm (libnbc falls back
  // to a ring where it does not apply), unless the user chose. Other MPIs ignore the variable.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
  // A process started alone (no launcher) is an MPI singleton. Open MPI 4 then forks a supporting
  // daemon (orted) only so that the process could spawn others, which we never do: one more process
  // to start and to fail under load, and 0.3 s of each start here (0.75 -> 0.45 s for axonn plan).
  // Other MPIs and launched processes ignore the variable.
  setenv("OMPI_MCA_ess_singleton_isolated", "1", /*overwrite=*/0);
  // MPI_THREAD_MULTIPLE lets a communication thread progress collectives while OpenMP threads run
  // GEMMs; we record what the library granted.
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  set_log_rank(rank_, size_);
  (void)node_ranks();  // collective over the world: every rank is here, so compute it now
}

Runtime::~Runtime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string v(text, static_cast<size_t>(std::max(length, 0)));
  v = v.substr(0, v.find('\n'));
  while (!v.empty() && (v.back() == '\0' || v.back() == ' ')) v.pop_back();
  return v;
}

int Runtime::process_world_size() {
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

void Runtime::abort(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  int size = 1;
  if (initialized && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &size);
  // One rank alone exits normally, so its exit code is the process's; with several ranks
  // MPI_Abort is what brings down the peers that may be blocked in a collective.
  if (initialized && !finalized && size > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
  if (initialized && !finalized) MPI_Finalize();
  std::exit(exit_code);
}

void Runtime::exit(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
  std::exit(exit_code);
}

bool Runtime::all_ranks_arrive_within(double seconds) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return true;
  MPI_Request request;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &request) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int done = 0;
  while (!done) {
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) break;
    // the request stays pending; the caller aborts, which ends it with the job
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace axonn::comm
