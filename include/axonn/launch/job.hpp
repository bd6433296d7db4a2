// launch/job.hpp — how the job was started and where its ranks run: the launcher (srun, mpirun),
// Slurm's job and step, every rank's host and node-local rank. `axonn train` logs it at start (with
// which grid groups stay inside a node) and records it in the trace's metadata (docs/multi-host.md).
//
//   const launch::Launch l = launch::detect_launch(world);   // collective over world
//   l.launcher == "srun", l.job_id == "1234", l.nodes == 2
#pragma once

#include <string>
#include <vector>

#include "axonn/comm/communicator.hpp"

namespace axonn::launch {

struct Launch {
  // "srun" (Slurm started the ranks, through PMIx), "mpirun" (Open MPI's launcher, inside a Slurm
  // allocation or not), or "unknown"
  std::string launcher;
  std::string job_id, step_id;  // SLURM_JOB_ID, SLURM_STEP_ID; empty outside Slurm
  // per world rank: its host name, its node (index of the host, in order of first appearance), its
  // rank among the ranks of that host (MPI's shared-memory split: comm::local_rank())
  std::vector<std::string> host_of_rank;
  std::vector<int> node_of_rank, local_rank_of_rank;
  int nodes = 1;

  // "srun (Slurm job 12, step 0): 4 ranks on 2 nodes (host0 host1), 2 per node"
  std::string str() const;
  // {"launcher", "slurm_job_id", "slurm_step_id", "nodes", "ranks": [{"host", "local_rank"}, ...]}
  std::string json() const;
};

// Collective over world: every rank's host name and node-local rank, gathered to all. Where srun
// started the ranks, Slurm's own node-local rank (SLURM_LOCALID) must agree with MPI's; a rank where
// it does not warns.
Launch detect_launch(comm::Communicator& world);

}  // namespace axonn::launch
