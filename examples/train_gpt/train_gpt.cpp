// train_gpt — train a small GPT on a 4D grid of MPI ranks through axonn's C++ API, with our own loop.
//
//   mpirun -n 4 train_gpt [GRID] [STEPS]        (defaults: 2,1,2,1 (Gx,Gy,Gz,Gdata) and 60 steps)
//
// A train::Session holds the run: the grid's communicators, this rank's shards of the model and of the
// AdamW state, and the data. Each step loads the global batch (this rank keeps its sequences) and runs
// train::train_step, the same step `axonn train` runs: forwards, backwards, gradient sums over the grid,
// clipping, the update. Every rank gets the same loss. The program checks that the loss fell.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "axonn/comm/factory.hpp"
#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/train/session.hpp"
#include "axonn/train/step.hpp"

using namespace axonn;

int main(int argc, char** argv) {
  comm::Runtime mpi(&argc, &argv);  // MPI for the program's lifetime
  const bool root = mpi.world_rank() == 0;
  try {
    train::TrainConfig c;      // every field has `axonn train`'s default
    c.model = "gpt2-tiny";     // 2 layers, 4 heads, 64 channels, random init (GPT-2's)
    c.grid = argc > 1 ? argv[1] : "2,1,2,1";
    c.steps = argc > 2 ? std::atoi(argv[2]) : 60;
    c.batch_size = 8;          // global, in sequences: split over Z and data
    c.seq_len = 64;
    c.lr = 1e-2f;
    c.warmup_steps = 10;
    c.quiet = true;            // data: the built-in synthetic corpus (no --data)

    train::Session s(c, comm::world());  // collective: checks the config, builds grid, model, optimizer
    const parallel::GridShape& g = s.grid().shape();
    if (root)
      std::printf("grid %s on %d ranks: %s, %d parameters\n", g.str().c_str(), s.world().size(),
                  s.model_config().str().c_str(), static_cast<int>(s.model_config().num_parameters()));

    float first = 0.0f, last = 0.0f;
    for (int step = s.first_step(); step < c.steps; step++) {
      const train::LocalBatch batch = s.next_batch();  // this rank's part of the global batch
      const train::StepResult r = train::train_step(s.gpt(), s.opt(), batch, {s.lr(step), c.grad_clip});
      if (step == 0) first = r.loss;
      last = r.loss;
      if (root && (step % 10 == 0 || step + 1 == c.steps))
        std::printf("step %3d  loss %.4f  lr %.2e  grad norm %.3f\n", step + 1, r.loss, s.lr(step), r.grad_norm);
    }
    // a random GPT-2 starts near ln(vocab); the synthetic corpus is far more predictable than that
    AXONN_CHECK(std::isfinite(last) && last < first - 1.0f, "the loss did not fall: ", first, " -> ", last);
    if (root) std::printf("loss %.4f -> %.4f: trained\n", first, last);
    return 0;
  } catch (const InvalidArgument& e) {  // bad input: alike on every rank
    if (root) std::fprintf(stderr, "train_gpt: %s\n", e.what());
    comm::Runtime::exit(2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_gpt (rank %d): %s\n", mpi.world_rank(), e.what());
    comm::Runtime::abort(1);
  }
}
