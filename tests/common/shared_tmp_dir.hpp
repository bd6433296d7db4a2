// A temporary directory every rank of the world sees under the same name, removed at the end of its
// scope (include "common/shared_tmp_dir.hpp"; collective: every rank constructs and destroys it).
#pragma once

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "axonn/comm/factory.hpp"

namespace axonn::test {

class SharedTmpDir {
 public:
  SharedTmpDir() {
    auto world = comm::world();
    std::vector<int32_t> buf(256, 0);
    if (world->rank() == 0) {
      char tmpl[] = "/tmp/axonn-test-XXXXXX";
      const char* d = mkdtemp(tmpl);
      if (d) std::memcpy(buf.data(), d, std::strlen(d));
    }
    world->broadcast(buf.data(), buf.size(), DType::kI32, 0);
    path_ = reinterpret_cast<const char*>(buf.data());
  }
  ~SharedTmpDir() {
    comm::world()->barrier();
    std::error_code ec;
    if (comm::world()->rank() == 0) std::filesystem::remove_all(path_, ec);
  }
  SharedTmpDir(const SharedTmpDir&) = delete;
  SharedTmpDir& operator=(const SharedTmpDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace axonn::test
