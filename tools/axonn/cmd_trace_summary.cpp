// axonn trace-summary — per rank, time in compute and in communication in a timeline trace
// (axonn train --trace), and how much of the communication was hidden under compute.
#include <cstdio>
#include <memory>
#include <string>

#include "axonn/comm/factory.hpp"
#include "axonn/train/trace_summary.hpp"
#include "commands.hpp"

namespace axonn::tools {

void add_trace_summary_command(CLI::App& app, Action* action) {
  struct Options {
    std::string file;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("trace-summary",
                                 "per rank: compute, communication, and the fraction of communication hidden "
                                 "under compute, from a trace written by `axonn train --trace`");
  sub->footer("Example:\n  axonn trace-summary runs/tiny/trace.json");
  sub->add_option("FILE", o->file, "Chrome trace-event JSON file")->required();
  sub->add_flag("--json", o->json, "print a JSON array instead of a table");
  sub->callback([o, action] {
    *action = [o] {
      auto ranks = train::summarize_trace_file(o->file);
      // every rank reads the file (bad input fails alike everywhere); rank 0 prints
      if (comm::world()->rank() != 0) return 0;
      if (o->json)
        std::printf("%s\n", train::trace_summary_json(ranks).c_str());
      else
        train::print_trace_summary(stdout, ranks);
      return 0;
    };
  });
}

}  // namespace axonn::tools
