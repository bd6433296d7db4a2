// launch/job.cpp — the launcher, Slurm's job and step, every rank's host (include/axonn/launch/job.hpp).
#include "axonn/launch/job.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"

namespace axonn::launch {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Launch detect_launch(comm::Communicator& world) {
  Launch l;
  // mpirun (Open MPI's ORTE) gives every rank OMPI_COMM_WORLD_RANK; srun's direct launch (PMIx) does
  // not, and gives SLURM_STEP_ID. Under mpirun in an allocation the ranks mpirun starts on its own
  // node carry no step, those its daemons start carry the daemons' step: only srun's step is the job's.
  const bool mpirun = !env("OMPI_COMM_WORLD_RANK").empty();
  const bool srun = !mpirun && !env("SLURM_STEP_ID").empty() && !env("PMIX_RANK").empty();
  l.launcher = mpirun ? "mpirun" : srun ? "srun" : "unknown";
  l.job_id = env("SLURM_JOB_ID");
  if (srun) l.step_id = env("SLURM_STEP_ID");

  // every rank's host name and node-local rank, to all (host names in fixed 64-byte records)
  constexpr size_t kHost = 64;
  char host[kHost] = {};
  gethostname(host, kHost - 1);
  const int32_t local = comm::local_rank();
  if (srun && env("SLURM_LOCALID") != std::to_string(local))
    log_warn("rank %d: Slurm's node-local rank SLURM_LOCALID=%s differs from MPI's %d (the ranks of a host by "
             "shared memory); the GPU is chosen by MPI's", world.rank(), env("SLURM_LOCALID").c_str(), local);
  const auto n = static_cast<size_t>(world.size());
  std::vector<char> hosts(kHost * n);
  world.all_gather(host, hosts.data(), kHost / 4, DType::kI32);  // over world
  l.local_rank_of_rank.resize(n);
  world.all_gather(&local, l.local_rank_of_rank.data(), 1, DType::kI32);  // over world
  std::vector<std::string> distinct;
  for (size_t r = 0; r < n; ++r) {
    std::string h(&hosts[r * kHost], strnlen(&hosts[r * kHost], kHost));
    auto it = std::find(distinct.begin(), distinct.end(), h);
    if (it == distinct.end()) it = distinct.insert(distinct.end(), h);
    l.node_of_rank.push_back(static_cast<int>(it - distinct.begin()));
    l.host_of_rank.push_back(std::move(h));
  }
  l.nodes = static_cast<int>(distinct.size());
  return l;
}

std::string Launch::str() const {
  std::string slurm;
  if (!job_id.empty()) slurm = " (Slurm job " + job_id + (step_id.empty() ? "" : ", step " + step_id) + ")";
  std::vector<std::string> names;
  for (const auto& h : host_of_rank)
    if (std::find(names.begin(), names.end(), h) == names.end()) names.push_back(h);
  std::string list;
  for (size_t i = 0; i < names.size() && i < 8; ++i) list += (i ? " " : "") + names[i];
  if (names.size() > 8) list += " ...";
  const size_t ranks = host_of_rank.size();
  const int most = ranks ? 1 + *std::max_element(local_rank_of_rank.begin(), local_rank_of_rank.end()) : 0;
  return ::axonn::detail::concat(launcher, slurm, ": ", ranks, " rank", ranks == 1 ? "" : "s", " on ", nodes,
                                 " node", nodes == 1 ? "" : "s", " (", list, "), up to ", most, " per node");
}

std::string Launch::json() const {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < host_of_rank.size(); ++r)
    ranks.push_back({{"host", host_of_rank[r]}, {"local_rank", local_rank_of_rank[r]}});
  return nlohmann::json({{"launcher", launcher},
                         {"slurm_job_id", job_id},
                         {"slurm_step_id", step_id},
                         {"nodes", nodes},
                         {"ranks", ranks}})
      .dump();
}

}  // namespace axonn::launch
