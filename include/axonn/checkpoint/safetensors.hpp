// checkpoint/safetensors.hpp — the project's own reader and writer of the safetensors format.
//
// A safetensors file (https://github.com/huggingface/safetensors) is:
//   8 bytes   N, the header length, unsigned little-endian
//   N bytes   a JSON object: {"__metadata__": {"key": "value", ...},            (optional, strings only)
//                             "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
//             padded with spaces (we pad to a multiple of 8 so the data starts aligned)
//   the data: every tensor's bytes, row-major, little-endian, at [begin, end) relative to the start
//             of the data; the tensors tile the data exactly (no gaps, no overlaps, nothing after).
// Dtypes supported: F32, BF16, I32, I64, U16 (axonn::DType). The reader checks all of the above and
// throws IoError naming the file and the problem; it memory-maps the file, so opening a large
// checkpoint costs only the header. The writer is atomic (checkpoint/atomic_file.hpp).
//
//   checkpoint::SafetensorsWriter w;
//   w.add("wte.weight", DType::kF32, {V, C}, wte_ptr);        // the pointer must live until write()
//   w.set_metadata("n_layer", "12");
//   checkpoint::FileDigest d = w.write("model.safetensors");
//
//   checkpoint::SafetensorsFile f("model.safetensors");
//   f.read("wte.weight", arena.tensor(0));                    // checks dtype and shape, copies
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/core/dtype.hpp"
#include "axonn/tensor/tensor.hpp"

namespace axonn::checkpoint {

// safetensors' dtype strings: "F32", "BF16", "I32", "I64", "U16"; nullopt for any other.
std::string_view safetensors_dtype_name(DType t);
std::optional<DType> safetensors_dtype_from_name(std::string_view s);

// The reference implementation refuses headers above 100 MB; so do we (a corrupt length field
// would otherwise make us allocate gigabytes).
constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

// One tensor's entry in a header.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;   // any rank, [] is a scalar
  uint64_t begin = 0, end = 0;  // byte range within the data section
  int64_t numel() const;
  uint64_t bytes() const { return end - begin; }
  std::string shape_str() const;  // "[2, 3]"
};

class SafetensorsWriter {
 public:
  // Adds a tensor. `data` holds numel(shape) * dtype_size(dtype) bytes and must stay valid until
  // write(). Names must be unique, non-empty and not "__metadata__" (InvalidArgument otherwise).
  void add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data);
  // Adds a tensor view with its own dtype and shape.
  void add(std::string name, const Tensor& t);
  // A string entry of "__metadata__".
  void set_metadata(std::string key, std::string value);

  size_t size() const { return entries_.size(); }
  // Bytes the file will have.
  uint64_t file_bytes() const;
  uint64_t data_bytes() const;  // the tensors' bytes (file_bytes() less the header)
  // Writes the file atomically (`<path>.tmp`, fsync, rename, fsync of the directory); the tensors
  // are laid out in the order they were added. Returns the size and hash of what was written.
  // `progress`, if any, counts the tensors' bytes written (data_bytes() in all).
  FileDigest write(const std::string& path, Progress* progress = nullptr) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
    uint64_t bytes;
  };
  std::string header() const;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// A validated, memory-mapped safetensors file (read-only).
class SafetensorsFile {
 public:
  // Opens, maps and validates the whole structure: header length against the file size, JSON
  // syntax, every entry's dtype, shape and offsets, shape x dtype size == byte range, and that the
  // ranges tile the data exactly. Throws IoError "safetensors file 'PATH': PROBLEM".
  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& o) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) = delete;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t file_bytes() const { return map_bytes_; }
  // The JSON header's length N (excluding the 8-byte length field).
  uint64_t header_bytes() const { return header_bytes_; }
  // Tensors in the order of their data (ascending offsets).
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor called `name`, or null.
  const TensorInfo* find(std::string_view name) const;
  // The tensor called `name`; IoError naming the file if it has none.
  const TensorInfo& get(std::string_view name) const;
  // The tensor's raw bytes inside the mapping (valid while this object lives). Not necessarily
  // aligned to the element size: copy out with memcpy.
  const std::byte* data(const TensorInfo& t) const;
  // Drops the pages of `bytes` bytes of the mapping from `begin` (inside data() of a tensor) from this
  // process's memory (madvise MADV_DONTNEED on the read-only mapping, whole pages around the range): what
  // has been read need not stay resident. data() stays valid; reading again reads the file again.
  void release(const std::byte* begin, size_t bytes) const;

  // Copies tensor `name` into `dst`, whose shape must equal the stored one (IoError otherwise).
  // Dtypes must match, except that a BF16 tensor widens into an F32 destination (exactly).
  void read(std::string_view name, const Tensor& dst) const;

 private:
  void validate_and_index();
  std::string path_;
  void* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  uint64_t header_bytes_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// True if the file's first bytes look like safetensors (a plausible length, then '{'); a cheap
// sniff for tools that accept several formats. Never throws; false for unreadable files.
bool looks_like_safetensors(const std::string& path);

}  // namespace axonn::checkpoint
