#include "commands.hpp"
namespace axonn::tools {
void add_train_command(CLI::App& app, Action* action) {
  auto* sub = app.add_subcommand("train", "train a GPT model");
  sub->callback([action] { *action = [] { return 0; }; });
}
}  // namespace axonn::tools
