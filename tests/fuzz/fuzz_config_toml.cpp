// A run's TOML configuration (train/config_file.hpp), as `axonn train --config` reads it. An accepted
// text must also print (config_toml, `--print-config`) to a text that reads back, without a refusal, to
// the same configuration.
#include <cstdlib>
#include <optional>

#include "axonn/train/config_file.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::optional<train::TrainConfig> accepted;
  fuzz::refused([&] {
    train::TrainConfig c;
    (void)train::read_config_toml(c, fuzz::as_text(data, size), "fuzz/run.toml");
    accepted = c;
  });
  if (!accepted) return 0;
  // outside refused(): a printed configuration that does not read back is a finding
  const std::string printed = train::config_toml(*accepted);
  train::TrainConfig again;
  (void)train::read_config_toml(again, printed, "fuzz/printed.toml");
  if (train::config_toml(again) != printed) std::abort();
  return 0;
}
