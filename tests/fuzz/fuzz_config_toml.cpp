// A run's TOML configuration (train/config_file.hpp), as `axonn train --config` reads it. An accepted
// text must also print (config_toml) to a text that reads back to the same configuration.
#include <cstdlib>

#include "axonn/train/config_file.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  fuzz::refused([&] {
    train::TrainConfig c;
    (void)train::read_config_toml(c, fuzz::as_text(data, size), "fuzz/run.toml");
    const std::string printed = train::config_toml(c);
    train::TrainConfig again;
    (void)train::read_config_toml(again, printed, "fuzz/printed.toml");
    if (train::config_toml(again) != printed) std::abort();  // the printed configuration does not read back
  });
  return 0;
}
