#include "axonn/checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "axonn/core/error.hpp"
#include "axonn/core/input_file.hpp"

namespace axonn::checkpoint {

namespace {

constexpr DType kAllDtypes[] = {DType::kF32, DType::kBF16, DType::kI32, DType::kI64, DType::kU16};

uint64_t read_le64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

void write_le64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

std::string shape_to_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Product of the dimensions, or nullopt on overflow of int64.
std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

}  // namespace

std::string_view safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU16: return "U16";
  }
  return "?";
}

std::optional<DType> safetensors_dtype_from_name(std::string_view s) {
  for (DType t : kAllDtypes)
    if (safetensors_dtype_name(t) == s) return t;
  return std::nullopt;
}

int64_t TensorInfo::numel() const { return checked_numel(shape).value_or(-1); }

std::string TensorInfo::shape_str() const { return shape_to_str(shape); }

// --- writer ------------------------------------------------------------------------------------

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<int64_t> shape, const void* data) {
  AXONN_CHECK_ARG(!name.empty() && name != "__metadata__", "safetensors: invalid tensor name '", name, "'");
  for (const Entry& e : entries_) AXONN_CHECK_ARG(e.name != name, "safetensors: tensor '", name, "' added twice");
  auto n = checked_numel(shape);
  AXONN_CHECK_ARG(n.has_value(), "safetensors: tensor '", name, "' has a bad shape ", shape_to_str(shape));
  auto bytes = static_cast<uint64_t>(*n) * dtype_size(dtype);
  AXONN_CHECK_ARG(bytes == 0 || data != nullptr, "safetensors: tensor '", name, "' has no data");
  entries_.push_back(Entry{std::move(name), dtype, std::move(shape), data, bytes});
}

void SafetensorsWriter::add(std::string name, const Tensor& t) {
  std::vector<int64_t> shape;
  for (int i = 0; i < t.shape().ndim(); i++) shape.push_back(t.shape()[i]);
  add(std::move(name), t.dtype(), std::move(shape), t.data());
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

std::string SafetensorsWriter::header() const {
  // ordered_json keeps "__metadata__" first and the tensors in data order: easier to read with
  // `head -c`, and the order does not matter to readers.
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    h["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    nlohmann::ordered_json t;
    t["dtype"] = safetensors_dtype_name(e.dtype);
    t["shape"] = e.shape;
    t["data_offsets"] = {offset, offset + e.bytes};
    h[e.name] = std::move(t);
    offset += e.bytes;
  }
  std::string s = h.dump();
  // pad with spaces so that the data section starts at a multiple of 8 bytes
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

uint64_t SafetensorsWriter::file_bytes() const { return 8 + header().size() + data_bytes(); }

uint64_t SafetensorsWriter::data_bytes() const {
  uint64_t n = 0;
  for (const Entry& e : entries_) n += e.bytes;
  return n;
}

FileDigest SafetensorsWriter::write(const std::string& path, Progress* progress) const {
  std::string h = header();
  unsigned char len[8];
  write_le64(len, h.size());
  AtomicFile f(path);
  f.write(len, sizeof len);
  f.write(h.data(), h.size());
  constexpr size_t kChunk = size_t{64} << 20;  // a progress update at least every 64 MiB
  for (const Entry& e : entries_)
    for (size_t at = 0; at < e.bytes; at += kChunk) {
      const size_t n = std::min(kChunk, e.bytes - at);
      f.write(static_cast<const std::byte*>(e.data) + at, n);
      if (progress) progress->add(static_cast<int64_t>(n));
    }
  return f.commit();
}

// --- reader ------------------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  int fd = open_input_file(path_, "safetensors file");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError("safetensors file '" + path_ + "' is not a regular file");
  }
  map_bytes_ = static_cast<uint64_t>(st.st_size);
  if (map_bytes_ < 8) {
    ::close(fd);
    throw IoError("safetensors file '" + path_ + "' is " + std::to_string(map_bytes_) +
                  " bytes: too short for the 8-byte header length (truncated?)");
  }
  // A private read-only mapping: pages are read on first touch, so opening a multi-GB checkpoint
  // reads only its header.
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw IoError("cannot map safetensors file '" + path_ + "': " + std::strerror(err));
  }
  try {
    validate_and_index();
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept
    : path_(std::move(o.path_)),
      map_(o.map_),
      map_bytes_(o.map_bytes_),
      header_bytes_(o.header_bytes_),
      tensors_(std::move(o.tensors_)),
      index_(std::move(o.index_)),
      metadata_(std::move(o.metadata_)) {
  o.map_ = nullptr;
}

void SafetensorsFile::validate_and_index() {
  const std::string where = "safetensors file '" + path_ + "'";
  const auto* bytes = static_cast<const unsigned char*>(map_);
  header_bytes_ = read_le64(bytes);
  AXONN_CHECK_IO(header_bytes_ >= 2, where, ": header length ", header_bytes_,
                 " is too small for a JSON object (is it a safetensors file?)");
  AXONN_CHECK_IO(header_bytes_ <= kSafetensorsMaxHeader, where, ": header length ", header_bytes_,
                 " exceeds the format's limit of ", kSafetensorsMaxHeader, " bytes (not a safetensors file?)");
  AXONN_CHECK_IO(header_bytes_ <= map_bytes_ - 8, where, ": header length ", header_bytes_,
                 " runs past the end of the file (", map_bytes_, " bytes): the file is truncated");
  const uint64_t data_bytes = map_bytes_ - 8 - header_bytes_;
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  AXONN_CHECK_IO(text[0] == '{', where, ": the header does not start with '{' (not a safetensors file?)");

  nlohmann::json h;
  try {
    h = nlohmann::json::parse(text, text + header_bytes_);
  } catch (const nlohmann::json::exception& e) {
    throw IoError(where + ": the header is not valid JSON: " + e.what());
  }
  AXONN_CHECK_IO(h.is_object(), where, ": the header is not a JSON object");

  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      AXONN_CHECK_IO(v.is_object(), where, ": __metadata__ is not an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        AXONN_CHECK_IO(m.value().is_string(), where, ": __metadata__ entry '", m.key(),
                       "' is not a string (the format allows only strings)");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tw = where + ": tensor '" + name + "'";
    AXONN_CHECK_IO(v.is_object(), tw, " is not an object with dtype, shape and data_offsets");
    TensorInfo t;
    t.name = name;
    auto dt = v.find("dtype");
    AXONN_CHECK_IO(dt != v.end() && dt->is_string(), tw, " has no dtype string");
    auto dtype = safetensors_dtype_from_name(dt->get<std::string>());
    AXONN_CHECK_IO(dtype.has_value(), tw, " has dtype '", dt->get<std::string>(),
                   "', which axonn does not support (supported: F32, BF16, I32, I64, U16)");
    t.dtype = *dtype;
    auto sh = v.find("shape");
    AXONN_CHECK_IO(sh != v.end() && sh->is_array(), tw, " has no shape array");
    for (const auto& d : *sh) {
      AXONN_CHECK_IO(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0), tw,
                     " has a shape entry that is not a non-negative integer: ", d.dump());
      AXONN_CHECK_IO(!d.is_number_unsigned() || d.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), tw,
                     " has a dimension too large: ", d.dump());
      t.shape.push_back(d.get<int64_t>());
    }
    auto off = v.find("data_offsets");
    AXONN_CHECK_IO(off != v.end() && off->is_array() && off->size() == 2 && (*off)[0].is_number_unsigned() &&
                       (*off)[1].is_number_unsigned(),
                   tw, " needs data_offsets [begin, end] of two non-negative integers");
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    AXONN_CHECK_IO(t.begin <= t.end, tw, " has data_offsets [", t.begin, ", ", t.end, "] with begin > end");
    AXONN_CHECK_IO(t.end <= data_bytes, tw, " has data_offsets [", t.begin, ", ", t.end, "] past the end of the data (",
                   data_bytes, " bytes): the file is truncated or its header is wrong");
    auto n = checked_numel(t.shape);
    AXONN_CHECK_IO(n.has_value(), tw, " has shape ", t.shape_str(), " whose size overflows");
    uint64_t expect;
    AXONN_CHECK_IO(
        !__builtin_mul_overflow(static_cast<uint64_t>(*n), dtype_size(t.dtype), &expect) && expect == t.bytes(), tw,
        " has shape ", t.shape_str(), " of ", dt->get<std::string>(), " (", *n, " x ", dtype_size(t.dtype),
        " bytes) but data_offsets [", t.begin, ", ", t.end, "] span ", t.bytes(), " bytes");
    tensors_.push_back(std::move(t));
  }

  // The ranges must tile [0, data_bytes) exactly, as the reference implementation requires: no
  // overlap (two tensors aliasing), no gap (hidden bytes), nothing after the last tensor.
  std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : tensors_) {
    AXONN_CHECK_IO(t.begin >= at, where, ": tensor '", t.name, "' [", t.begin, ", ", t.end, ") overlaps tensor '",
                   prev ? prev->name : "", "' [", prev ? prev->begin : 0, ", ", at, ")");
    AXONN_CHECK_IO(t.begin == at, where, ": ", t.begin - at, " bytes before tensor '", t.name,
                   "' belong to no tensor (a gap in data_offsets)");
    at = t.end;
    prev = &t;
  }
  AXONN_CHECK_IO(at == data_bytes, where, ": ", data_bytes - at,
                 " bytes after the last tensor belong to no tensor (the header's offsets end at ", at, ", the data is ",
                 data_bytes, " bytes)");
  for (size_t i = 0; i < tensors_.size(); i++) index_.emplace(tensors_[i].name, i);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::get(std::string_view name) const {
  const TensorInfo* t = find(name);
  AXONN_CHECK_IO(t, "safetensors file '", path_, "' has no tensor '", name, "'");
  return *t;
}

const std::byte* SafetensorsFile::data(const TensorInfo& t) const {
  return static_cast<const std::byte*>(map_) + 8 + header_bytes_ + t.begin;
}

void SafetensorsFile::release(const std::byte* begin, size_t bytes) const {
  // whole pages around the range: a neighbour's bytes on the edge pages are read again when needed
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(begin) + bytes + page - 1) & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);  // advice: a failure changes nothing
}

void SafetensorsFile::read(std::string_view name, const Tensor& dst) const {
  const TensorInfo& t = get(name);
  std::vector<int64_t> want;
  for (int i = 0; i < dst.shape().ndim(); i++) want.push_back(dst.shape()[i]);
  AXONN_CHECK_IO(t.shape == want, "safetensors file '", path_, "': tensor '", name, "' has shape ", t.shape_str(),
                 ", expected ", shape_to_str(want));
  const std::byte* src = data(t);
  if (t.dtype == dst.dtype()) {
    std::memcpy(dst.data(), src, t.bytes());
  } else if (t.dtype == DType::kBF16 && dst.dtype() == DType::kF32) {
    float* out = dst.f32();
    const auto n = static_cast<size_t>(t.numel());
    for (size_t i = 0; i < n; i++) {
      uint16_t b;
      std::memcpy(&b, src + 2 * i, 2);
      out[i] = bf16_to_f32(b);
    }
  } else {
    throw IoError("safetensors file '" + path_ + "': tensor '" + std::string(name) + "' is " +
                  std::string(safetensors_dtype_name(t.dtype)) + ", expected " +
                  std::string(safetensors_dtype_name(dst.dtype())));
  }
}

bool looks_like_safetensors(const std::string& path) {
  int fd = -1;
  try {
    fd = open_input_file(path, "");
  } catch (const IoError&) {
    return false;  // the reader that follows says what is wrong
  }
  unsigned char b[9];
  ssize_t n = ::read(fd, b, sizeof b);
  ::close(fd);
  if (n != 9) return false;
  // the length is not checked against the file size: a truncated file should still be recognised,
  // so that opening it reports the truncation
  uint64_t len = read_le64(b);
  return b[8] == '{' && len >= 2 && len <= kSafetensorsMaxHeader;
}

}  // namespace axonn::checkpoint
