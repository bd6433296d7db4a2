// axonn — one binary, many subcommands (train, ...). Runs under MPI even on one rank, once its
// command line has parsed: --help, --version and flag errors need no MPI, so they work where MPI's
// start-up does not (a login node, a broken launcher environment, a singleton start that fails).
#include <exception>
#include <new>
#include <string>

#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/version.hpp"
#include "commands.hpp"

namespace {

// Bad input (flags, grid, files) is normally met alike by every rank, which validate the same
// things before any collective: rank 0 prints the message, and when every rank arrives here within
// a few seconds they all leave quietly with the exit code. Otherwise some rank is elsewhere
// (perhaps blocked in a collective): this rank prints its own message too and aborts the job.
[[noreturn]] void fail_once(const axonn::comm::Runtime& mpi, const char* what, int code) {
  using axonn::comm::Runtime;
  if (mpi.world_rank() == 0) axonn::log_error("%s", what);
  if (Runtime::all_ranks_arrive_within(10.0)) Runtime::exit(code);
  if (mpi.world_rank() != 0) axonn::log_error("%s", what);
  Runtime::abort(code);
}

}  // namespace

int main(int argc, char** argv) {
  using axonn::comm::Runtime;
  CLI::App app{"axonn: 4D hybrid-parallel (AxoNN) training of GPT models, in C++ on MPI"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("axonn ") + axonn::version() + " (git " + axonn::git_commit() + ")");
  axonn::tools::Action action;
  axonn::tools::add_train_command(app, &action);
  axonn::tools::add_plan_command(app, &action);
  axonn::tools::add_calibrate_command(app, &action);
  axonn::tools::add_bench_command(app, &action);
  axonn::tools::add_convert_command(app, &action);
  axonn::tools::add_inspect_command(app, &action);
  axonn::tools::add_trace_summary_command(app, &action);
  axonn::tools::add_prepare_command(app, &action);
  axonn::tools::add_tokenizer_command(app, &action);
  axonn::tools::add_report_command(app, &action);
  axonn::tools::add_generate_command(app, &action);
  axonn::tools::add_memorization_command(app, &action);

  // Parsing only stores the action (commands.hpp), so it runs before MPI starts.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same command line, so every rank sees the same error: the launcher's
    // rank 0 prints it (or the --help text), and each rank leaves with the same code.
    int code = e.get_exit_code();
    if (axonn::comm::launcher_rank() == 0) code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  Runtime mpi(&argc, &argv);
  try {
    int code = action ? action() : 0;
    Runtime::exit(code);
  } catch (const axonn::InvalidArgument& e) {
    fail_once(mpi, e.what(), 2);
  } catch (const axonn::IoError& e) {
    fail_once(mpi, e.what(), 1);
  } catch (const std::bad_alloc&) {
    // one rank out of memory where no check foresaw it: say what to change, and bring the job down;
    // the hints are those of the command that ran (a model's sizes mean nothing to prepare)
    const std::string command = app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name();
    const char* hint = command == "prepare" ? "use fewer --threads (each holds the document, or the piece of one, "
                                              "that it encodes), and give a huge file a --doc-separator"
                       : command == "tokenizer" ? "use less text (tokenizer train: --max-sentences)"
                       : command == "generate"  ? "use a smaller --num-samples or --max-new-tokens, or more "
                                                  "model-parallel ranks (--grid)"
                                                : "use more ranks (--grid), a smaller --batch-size or "
                                                  "--micro-batch-size, --recompute, or a smaller model";
    axonn::log_error("out of memory (std::bad_alloc) on this rank: axonn %s needs more memory than the machine gives "
                     "it; %s", command.c_str(), hint);
    Runtime::abort(1);
  } catch (const std::exception& e) {
    // anything else may have happened on this rank alone: print it here and bring the job down
    axonn::log_error("%s", e.what());
    Runtime::abort(1);
  }
}
