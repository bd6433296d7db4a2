// axonn — one binary, many subcommands (train, ...). Runs under MPI even on one rank.
#include <chrono>
#include <exception>
#include <thread>

#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  using axonn::comm::Runtime;
  Runtime mpi(&argc, &argv);
  CLI::App app{"axonn: 4D hybrid-parallel (AxoNN) training of GPT models, in C++ on MPI"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "axonn 0.1.0");
  axonn::tools::Action action;
  axonn::tools::add_train_command(app, &action);
  axonn::tools::add_plan_command(app, &action);
  axonn::tools::add_convert_command(app, &action);
  axonn::tools::add_inspect_command(app, &action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same command line, so every rank sees the same error: rank 0 prints
    // it (or the --help text), and each rank leaves with the same code.
    int code = e.get_exit_code();
    if (mpi.world_rank() == 0) code = app.exit(e);
    Runtime::exit(code == 0 ? 0 : 2);
  }
  try {
    int code = action ? action() : 0;
    Runtime::exit(code);
  } catch (const axonn::InvalidArgument& e) {
    // Bad input is detected alike on every rank: print it once, from rank 0. The other ranks give
    // rank 0 time to print before the abort (rank 0's own abort ends them sooner).
    if (mpi.world_rank() == 0) {
      axonn::log_error("%s", e.what());
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    Runtime::abort(2);
  } catch (const std::exception& e) {
    axonn::log_error("%s", e.what());
    Runtime::abort(1);
  }
}
