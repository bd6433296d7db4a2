// A run's metrics.jsonl (report/metrics.hpp), as `axonn report` reads it.
#include "axonn/report/metrics.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  fuzz::refused([&] { (void)report::parse_metrics(fuzz::as_text(data, size), "fuzz/metrics.jsonl"); });
  return 0;
}
