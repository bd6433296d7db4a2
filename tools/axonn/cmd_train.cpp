// axonn train — flags and a TOML config file (train/config_file.hpp: one table of settings for both) to a
// TrainConfig, then train::run().
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <type_traits>

#include "axonn/comm/factory.hpp"
#include "axonn/train/config_file.hpp"
#include "axonn/train/trainer.hpp"
#include "commands.hpp"

namespace axonn::tools {

void add_train_command(CLI::App& app, Action* action) {
  auto flags = std::make_shared<train::TrainConfig>();
  auto config_file = std::make_shared<std::string>();
  auto print_config = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("train", "train a GPT-2 or Llama model (llm.c, Hugging Face or axonn checkpoints; llm.c token shards)");
  sub->option_defaults()->always_capture_default();
  sub->footer(
      "Examples:\n"
      "  axonn train --model gpt2-tiny --steps 50 --run-dir runs/tiny && axonn report runs/tiny\n"
      "  mpirun -np 4 axonn train --config run.toml --grid 2,1,1,2 --steps 100\n"
      "  axonn train --config runs/tiny/config.toml --run-dir runs/again   # the same run again");
  sub->add_option("--config", *config_file, "read the settings from this TOML file: a section per group below, each "
                  "key a flag's name (--print-config writes one); flags on the command line override it");
  sub->add_flag("--print-config", *print_config, "print the effective configuration (--config's file, then the "
                "flags) as TOML, which --config reads back, and exit");
  // every setting: its flag, in the group of its config file section
  for (const train::ConfigOption& o : train::config_options())
    std::visit(
        [&](auto field) {
          auto& value = (*flags).*field;
          using T = std::remove_reference_t<decltype(value)>;
          CLI::Option* opt = nullptr;
          if constexpr (std::is_same_v<T, bool>)
            opt = sub->add_flag(o.flag, value, o.help);
          else
            opt = sub->add_option(o.flag, value, o.help);
          opt->group(std::string("[") + o.section + "]");
          if constexpr (std::is_same_v<T, uint64_t>) opt->check(check_unsigned64);  // the seeds
        },
        o.field);
  // not a setting of the run (config.toml never records it): an ask of this command line
  sub->add_flag("--overwrite", flags->overwrite, "let this run replace another run's outputs: the checkpoints of "
                "its --checkpoint-dir, its run directory's record and traces, an existing --metrics or --save file "
                "(refused otherwise; docs/resilience.md)")->group("[checkpoint]");
  sub->callback([flags, config_file, print_config, action, sub] {
    // the flags on the command line: they override the file, and resuming restores the checkpoint's
    // settings for all others
    std::set<std::string> given;
    for (const CLI::Option* o : sub->get_options())
      if (o->count() > 0) given.insert(o->get_name());
    *action = [flags, config_file, print_config, given] {
      train::TrainConfig c = train::effective_config(*config_file, *flags, given);
      c.overwrite = flags->overwrite;
      comm::CommOptions options;
      options.timeout_s = c.comm_timeout;
      auto world = comm::world(options);
      if (*print_config) {
        if (world->rank() == 0) std::fputs(train::config_toml(c).c_str(), stdout);
        return 0;
      }
      const train::TrainResult r = train::run(c, world);
      // stopped by a signal with nothing saved: the conventional exit code of that signal, so that a
      // scheduler does not take the job for done
      if (r.stop == train::Stop::kBadSteps) return 1;  // the guard stopped a diverged run (said why)
      return r.stop == train::Stop::kSignal && r.checkpoint.empty() ? 128 + r.signal : 0;
    };
  });
}

}  // namespace axonn::tools
