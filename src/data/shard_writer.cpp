#include "axonn/data/shard_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "axonn/core/error.hpp"
#include "axonn/data/token_dataset.hpp"

namespace axonn::data {

ShardWriter::ShardWriter(std::string dir, std::string prefix, int token_bytes, int64_t shard_tokens)
    : dir_(std::move(dir)), prefix_(std::move(prefix)), token_bytes_(token_bytes), shard_tokens_(shard_tokens) {
  AXONN_CHECK_ARG(token_bytes == 2 || token_bytes == 4, "token width must be 2 or 4 bytes, got ", token_bytes);
  check_shard_tokens(shard_tokens);
}

void ShardWriter::check_shard_tokens(int64_t shard_tokens) {
  AXONN_CHECK_ARG(shard_tokens > 0 && shard_tokens <= INT32_MAX, "--shard-size must be 1 .. ", INT32_MAX,
                  " tokens (llm.c's header holds the count as an int32), got ", shard_tokens);
}

ShardWriter::~ShardWriter() {
  if (f_) std::fclose(f_);  // abandoned (an error elsewhere): the staging directory is removed
}

void ShardWriter::open_next() {
  char name[64];
  std::snprintf(name, sizeof name, "%s_%06zu.bin", prefix_.c_str(), paths_.size());
  paths_.push_back(dir_ + "/" + name);
  f_ = std::fopen(paths_.back().c_str(), "wb");
  AXONN_CHECK_IO(f_, "cannot create token shard '", paths_.back(), "': ", std::strerror(errno));
  const std::vector<int32_t> placeholder(256, 0);
  AXONN_CHECK_IO(std::fwrite(placeholder.data(), sizeof(int32_t), 256, f_) == 256, "cannot write token shard '",
                 paths_.back(), "': ", std::strerror(errno));
  in_shard_ = 0;
}

void ShardWriter::close_current() {
  int32_t header[256] = {};
  header[0] = token_bytes_ == 2 ? kGpt2TokensMagic : kLlama3TokensMagic;
  header[1] = token_bytes_ == 2 ? 1 : 7;
  header[2] = static_cast<int32_t>(in_shard_);
  const std::string& path = paths_.back();
  const bool ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(header, sizeof header, 1, f_) == 1 &&
                  std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
  const int err = errno;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  AXONN_CHECK_IO(ok && closed, "cannot write token shard '", path, "': ", std::strerror(err));
}

void ShardWriter::append(std::span<const uint32_t> tokens) {
  size_t i = 0;
  while (i < tokens.size()) {
    if (!f_) open_next();
    const size_t n = std::min<size_t>(tokens.size() - i, static_cast<size_t>(shard_tokens_ - in_shard_));
    buf_.resize(n * static_cast<size_t>(token_bytes_));
    if (token_bytes_ == 2) {
      auto* out = reinterpret_cast<uint16_t*>(buf_.data());
      for (size_t k = 0; k < n; k++) {
        AXONN_DCHECK(tokens[i + k] <= 0xFFFF, "token ", tokens[i + k], " does not fit uint16");
        out[k] = static_cast<uint16_t>(tokens[i + k]);
      }
    } else {
      std::memcpy(buf_.data(), tokens.data() + i, n * sizeof(uint32_t));
    }
    AXONN_CHECK_IO(std::fwrite(buf_.data(), 1, buf_.size(), f_) == buf_.size(), "cannot write token shard '",
                   paths_.back(), "': ", std::strerror(errno));
    in_shard_ += static_cast<int64_t>(n);
    total_ += static_cast<int64_t>(n);
    i += n;
    if (in_shard_ == shard_tokens_) close_current();
  }
}

std::vector<std::string> ShardWriter::finish() {
  if (f_) close_current();
  return paths_;
}

}  // namespace axonn::data
