// axonn — one binary, many subcommands (train, ...). Runs under MPI even on one rank, once its
// command line has parsed: --help, --version and flag errors need no MPI, so they work where MPI's
// start-up does not (a login node, a broken launcher environment, a singleton start that fails).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "axonn/comm/runtime.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/spelling.hpp"
#include "axonn/core/log.hpp"
#include "axonn/core/version.hpp"
#include "commands.hpp"

namespace {

// The OpenMP threads' wait between parallel regions, chosen per command. Generation (generate, memorization)
// runs a few hundred small parallel regions per token; with GNU OpenMP's default, threads spin for a while at
// each region's end, which on a machine whose cores other processes also use makes every region wait for a
// spinning thread's time slice: decode at 2 threads with two busy processes beside it measured 5-7 tokens/s
// against 22 passive (llama-124m; docs/generate.md). Passive waiting costs little where regions are few and
// large (training keeps the default). libgomp reads OMP_WAIT_POLICY once, as it loads, before main() (and a
// setenv from the executable's .preinit_array is not seen by it): so the command starts itself again with the
// variable set, before MPI starts (the same process: a launcher sees no difference). A user's own
// OMP_WAIT_POLICY is kept; if the new start fails, the command runs as it is.
void choose_omp_wait_policy(int argc, char** argv) {
  if (argc < 2 || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  const std::string command = argv[1];
  if (command != "generate" && command != "memorization") return;
  setenv("OMP_WAIT_POLICY", "passive", 0);
  execv("/proc/self/exe", argv);  // returns only on failure
}

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

// `axonn train`'s flags under the names other trainers give them (Megatron-LM, Hugging Face's Trainer with its
// underscores made dashes, llm.c), for a user who brings their habits: the flag to write here instead (or why
// there is none). Only for a flag with no near spelling of ours.
constexpr std::pair<std::string_view, std::string_view> kPeerTrainFlags[] = {
    {"--train-iters", "--steps"},
    {"--max-steps", "--steps"},
    {"--num-iterations", "--steps"},
    {"--global-batch-size", "--batch-size (the sequences of one step, all ranks together)"},
    {"--gradient-accumulation-steps", "--micro-batch-size (sequences per rank per micro-batch: the gradients "
                                      "accumulate over the rank's micro-batches)"},
    {"--grad-accum", "--micro-batch-size (sequences per rank per micro-batch: the gradients accumulate over the "
                     "rank's micro-batches)"},
    {"--lr-warmup-iters", "--warmup-steps"},
    {"--lr-warmup-steps", "--warmup-steps"},
    {"--learning-rate", "--lr"},
    {"--clip-grad", "--grad-clip"},
    {"--max-grad-norm", "--grad-clip"},
    {"--adam-beta1", "--beta1"},
    {"--adam-beta2", "--beta2"},
    {"--adam-eps", "--eps"},
    {"--seq-length", "--seq-len"},
    {"--save-interval", "--checkpoint-every (with --checkpoint-dir)"},
    {"--load", "--init (a model) or --resume-from (a checkpoint step)"},
    {"--eval-interval", "--val-every (with --val-data)"},
    {"--eval-iters", "--val-batches"},
    {"--recompute-activations", "--recompute"},
    {"--bf16", "--dtype bf16"},
    {"--fp16", "--dtype bf16 (fp16 is not offered)"},
    {"--tensor-model-parallel-size", "--grid tp-x=N,tp-y=N,fsdp=N,dp=N (docs/parallelism.md maps the degrees)"},
    {"--data-parallel-size", "--grid tp-x=N,tp-y=N,fsdp=N,dp=N (docs/parallelism.md maps the degrees)"},
    {"--pipeline-model-parallel-size", "pipeline parallelism is absent here (every rank holds blocks of all the "
                                       "layers); --grid splits each layer instead (docs/parallelism.md)"},
    {"--context-parallel-size", "context parallelism is absent here (a sequence is never split; "
                                "docs/parallelism.md)"},
};

// "did you mean" for a command line CLI11 refused: an unknown command at any level (axonn trian, axonn
// tokenizer encdoe; the list of commands when none is near), which replaces CLI11's "A subcommand is
// required" (not what happened), or an unknown flag of the command reached (train --step 10). Empty text
// when there is nothing to say.
struct Suggestion {
  std::string text;
  bool unknown_command = false;
};
Suggestion suggestion(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  std::string path = "axonn";
  int i = 1;
  for (; i < argc && argv[i][0] != '-'; i++) {
    const std::string word = argv[i];
    std::vector<std::string> commands;
    const CLI::App* next = nullptr;
    for (const CLI::App* s : at->get_subcommands({})) {
      commands.push_back(s->get_name());
      if (s->get_name() == word) next = s;
    }
    if (commands.empty()) break;  // a command's own positional arguments
    if (next == nullptr) {
      const auto near = axonn::nearest_word(word, commands);
      if (near) return {path + " has no command '" + word + "': did you mean '" + path + " " + *near + "'?", true};
      std::string all;
      for (const std::string& c : commands) all += (all.empty() ? "" : ", ") + c;
      return {path + " has no command '" + word + "'; its commands are " + all, true};
    }
    at = next;
    path += " " + word;
  }
  if (at == &app) return {};
  std::vector<std::string> flags;
  for (const CLI::Option* o : at->get_options())
    for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
  std::string said;
  for (; i < argc; i++) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), arg) != flags.end()) continue;
    if (const auto near = axonn::nearest_word(arg, flags)) {
      said += (said.empty() ? "" : "; ") + path + " has no flag " + arg + ": did you mean " + *near + "?";
      continue;
    }
    if (path != "axonn train") continue;
    std::string dashed = arg;  // Hugging Face's --max_steps
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    for (const auto& [theirs, ours] : kPeerTrainFlags)
      if (dashed == theirs)
        said += (said.empty() ? "" : "; ") + path + " has no flag " + arg + " (another trainer's name): " +
                (ours.starts_with("--") ? "use " : "") + std::string(ours);
  }
  return {said, false};
}

}  // namespace

int main(int argc, char** argv) {
  choose_omp_wait_policy(argc, argv);
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
    if (axonn::comm::launcher_rank() == 0) {
      // the nearest command or flag comes first, where the eye lands
      const Suggestion hint = e.get_exit_code() == 0 ? Suggestion{} : suggestion(app, argc, argv);
      if (!hint.text.empty()) std::fprintf(stderr, "%s\n", hint.text.c_str());
      if (!hint.unknown_command) {
        code = app.exit(e);
      } else {
        std::fprintf(stderr, "Run with --help for more information.\n");
        code = e.get_exit_code();
      }
    }
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
