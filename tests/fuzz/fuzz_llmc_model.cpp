// llm.c's model checkpoint (checkpoint/llmc.hpp): the header, then the parameters into an arena. The
// arena is only as large as the file (read_llmc_config checks the file's size against the header).
#include "axonn/checkpoint/llmc.hpp"
#include "axonn/model/spec.hpp"
#include "axonn/tensor/arena.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace axonn;
  std::string path = fuzz::write_file("model.bin", fuzz::as_text(data, size));
  fuzz::refused([&] {
    model::GptConfig config = checkpoint::read_llmc_config(path);
    Arena params("parameters");
    model::reserve_params(params, model::model_spec(config));
    params.allocate();
    checkpoint::load_llmc_params(path, config, params);
  });
  return 0;
}
