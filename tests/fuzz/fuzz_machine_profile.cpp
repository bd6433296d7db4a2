// A machine profile (planner/machine.hpp): the planner's JSON, as `axonn calibrate` writes it.
#include "axonn/planner/machine.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  fuzz::refused([&] { (void)planner::parse_machine_profile(fuzz::as_text(data, size), "fuzz/machine.json"); });
  return 0;
}
