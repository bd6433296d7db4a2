// A Chrome trace as `axonn train --trace` writes it (train/trace_summary.hpp), summarised per rank.
#include <cstdio>

#include "axonn/train/trace_summary.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  fuzz::refused([&] {
    auto ranks = train::summarize_trace(std::string(fuzz::as_text(data, size)));
    (void)train::trace_summary_json(ranks);
  });
  return 0;
}
