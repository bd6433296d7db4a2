// bench/checkpoint_io — time and bandwidth of sharded checkpoints (checkpoint/sharded.hpp): saving a
// model's parameters and AdamW moments on one rank or a grid, loading them back on the same grid
// (warm: from the page cache; cold: after evicting the files from it with posix_fadvise), and loading
// them resharded on other grids (--reshard; "1" is one rank, rank 0 alone).
//
//   build/bin/bench_checkpoint_io [--model gpt2-124m] [--dir /tmp/axonn-ckbench] [--repeat 3]
//                                 [--reshard 1,1,1,1;1,2,1,2]
//   mpirun -n 4 build/bin/bench_checkpoint_io --grid 2,1,2,1 --reshard "1,2,1,2;1,1,1,1"
//
// Times are the slowest rank's, the whole collective call (verification, agreement, fsyncs, commit).
// Bandwidth = bytes of every file of the step / time (save), bytes read by every rank / time (load).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "axonn/checkpoint/sharded.hpp"
#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/timer.hpp"
#include "axonn/model/shard_map.hpp"

using namespace axonn;

namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

Arena shard_arena(const model::ShardMap& map, const std::string& name) {
  Arena a(name);
  for (int i = 0; i < static_cast<int>(map.size()); i++)
    a.reserve(map.spec().params[static_cast<size_t>(i)].name, map.shard_shape(i));
  a.allocate();
  for (size_t i = 0; i < a.size(); i++) {
    Tensor t = a.tensor(i);
    for (int64_t j = 0; j < t.numel(); j++) t.f32()[j] = static_cast<float>((j * 2654435761u) % 1000003) * 1e-6f;
  }
  return a;
}

double slowest(comm::Communicator& c, double seconds) {
  int64_t us = static_cast<int64_t>(seconds * 1e6);
  c.all_reduce(&us, 1, DType::kI64, comm::ReduceOp::kMax);
  return static_cast<double>(us) * 1e-6;
}

double total(comm::Communicator& c, uint64_t bytes) {
  int64_t b = static_cast<int64_t>(bytes);
  c.all_reduce(&b, 1, DType::kI64, comm::ReduceOp::kSum);
  return static_cast<double>(b);
}

// Drops the step's files from the page cache (they are clean after the save's fsync).
void evict(const std::string& dir) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    int fd = ::open(e.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  comm::Runtime mpi(&argc, &argv);
  std::string model_name = "gpt2-124m", dir = "/tmp/axonn-ckbench", grid_text, reshard;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--grid")) grid_text = argv[i + 1];
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reshard")) reshard = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  auto world = comm::world();
  const bool root = world->rank() == 0;
  const model::GptConfig cfg = model::gpt_preset(model_name);
  const parallel::GridShape shape = parallel::parse_grid(grid_text, world->size());
  {
    parallel::Grid grid(shape, world);
    model::ShardMap map(cfg, shape, grid.coords());
    Arena p = shard_arena(map, "params"), m = shard_arena(map, "m"), v = shard_arena(map, "v");
    if (root)
      std::printf("%s on grid %s: %.1f MiB of params + AdamW m, v on rank 0; OMP_NUM_THREADS=%s\n",
                  cfg.str().c_str(), shape.str().c_str(), mib(3.0 * static_cast<double>(p.bytes())),
                  std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "(unset)");
    std::string step_dir;
    for (int r = 0; r < repeat; r++) {
      checkpoint::Manifest man;
      man.model = cfg;
      man.step = r + 1;
      world->barrier();
      checkpoint::SaveResult s = checkpoint::save_sharded(dir, man, grid, p, &m, &v, 1);
      const double t = slowest(*world, s.seconds);
      step_dir = s.dir;
      if (root)
        std::printf("save         %8.1f MiB in %6.3f s  %7.0f MiB/s  (%d files)\n", mib(static_cast<double>(s.bytes)),
                    t, mib(static_cast<double>(s.bytes)) / t, shape.gx * shape.gy * shape.gz);
    }
    for (int r = 0; r < repeat; r++) {
      for (bool cold : {false, true}) {
        if (cold && root) evict(step_dir);
        world->barrier();
        checkpoint::LoadResult l = checkpoint::load_sharded(step_dir, grid, cfg, p, &m, &v);
        const double t = slowest(*world, l.seconds);
        const double bytes = total(*world, l.bytes_read);
        if (root)
          std::printf("load %-5s   %8.1f MiB in %6.3f s  %7.0f MiB/s  (read by all ranks, checksums included)\n",
                      cold ? "cold" : "warm", mib(bytes), t, mib(bytes) / t);
      }
    }
    // resharded loads
    size_t at = 0;
    while (!reshard.empty() && at != std::string::npos) {
      size_t next = reshard.find(';', at);
      std::string g = reshard.substr(at, next == std::string::npos ? std::string::npos : next - at);
      at = next == std::string::npos ? next : next + 1;
      parallel::GridShape to;
      if (std::sscanf(g.c_str(), "%d,%d,%d,%d", &to.gx, &to.gy, &to.gz, &to.gdata) != 4) {
        std::fprintf(stderr, "--reshard takes GX,GY,GZ,GD;...: got '%s'\n", g.c_str());
        return 2;
      }
      std::shared_ptr<comm::Communicator> comm = world;
      std::shared_ptr<comm::Communicator> self;
      if (to.size() != world->size()) {
        self = std::shared_ptr<comm::Communicator>(world->split(root ? 0 : -1, 0, "self"));
        comm = self;
      }
      if (comm) {
        parallel::Grid tgrid(to, comm);
        model::ShardMap tmap(cfg, to, tgrid.coords());
        Arena tp = shard_arena(tmap, "params"), tm = shard_arena(tmap, "m"), tv = shard_arena(tmap, "v");
        if (tgrid.rank() == 0) evict(step_dir);
        comm->barrier();
        checkpoint::LoadResult l = checkpoint::load_sharded(step_dir, tgrid, cfg, tp, &tm, &tv);
        const double t = slowest(*comm, l.seconds);
        if (root)
          std::printf("reshard %s -> %s (cold): %8.1f MiB read by rank 0 in %6.3f s  %7.0f MiB/s\n",
                      shape.str().c_str(), to.str().c_str(), mib(static_cast<double>(l.bytes_read)), t,
                      mib(static_cast<double>(l.bytes_read)) / t);
      }
      world->barrier();
    }
  }
  world->barrier();
  if (root) std::filesystem::remove_all(dir);
  return 0;
}
