// Reading GGUF files (checkpoint/gguf.hpp), from ggml's docs/gguf.md: any version 2 or 3 file, its sizes
// checked before they are used, since a GGUF file comes from anywhere.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "axonn/checkpoint/gguf.hpp"
#include "axonn/core/dtype.hpp"
#include "axonn/core/error.hpp"
#include "axonn/core/input_file.hpp"

namespace axonn::checkpoint {

namespace {

struct TypeRow {
  uint32_t id;
  const char* name;
  uint64_t block, bytes;
};
// ggml's types (ggml.h's enum ggml_type; ids 4, 5 and 31-33, 36-38 are retired). Block sizes and bytes per block
// as llama.cpp reports them (ggml_blck_size, ggml_type_size).
constexpr TypeRow kTypes[] = {
    {0, "F32", 1, 4},          {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},     {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},    {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},         {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},        {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
    {40, "NVFP4", 64, 36},     {41, "Q1_0", 128, 18},    {42, "Q2_0", 64, 18}};

const TypeRow* type_row(uint32_t id) {
  for (const TypeRow& r : kTypes)
    if (r.id == id) return &r;
  return nullptr;
}

// GGUF's metadata value types.
enum : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9,
  kU64 = 10, kI64 = 11, kF64 = 12
};
// Bytes of a scalar of type t (0: not a fixed-size scalar).
uint64_t scalar_bytes(uint32_t t) {
  switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

constexpr int kMaxArrayDepth = 4;  // arrays of arrays: deeper nesting is refused (llama.cpp writes none)

// The file, read forward with every length checked against what is left.
class Reader {
 public:
  Reader(const std::string& path, uint64_t size) : path_(path), size_(size), in_(path, std::ios::binary) {
    AXONN_CHECK_IO(in_.good(), "cannot open '", path, "' for reading");
  }
  uint64_t at() const { return at_; }
  uint64_t left() const { return size_ - at_; }
  [[noreturn]] void fail(const std::string& what) const { throw IoError("GGUF file '" + path_ + "': " + what); }
  void need(uint64_t n, const char* what) const {
    if (n > left())
      fail(std::string(what) + " at byte " + std::to_string(at_) + " needs " + std::to_string(n) +
           " bytes, but the file ends after " + std::to_string(left()) + " more (truncated or not GGUF)");
  }
  void bytes(void* out, uint64_t n, const char* what) {
    need(n, what);
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    AXONN_CHECK_IO(in_.good(), "cannot read '", path_, "' at byte ", at_);
    at_ += n;
  }
  template <class T>
  T get(const char* what) {
    T v{};
    bytes(&v, sizeof v, what);
    return v;
  }
  std::string str(const char* what) {
    const auto n = get<uint64_t>(what);
    need(n, what);
    std::string s(static_cast<size_t>(n), '\0');
    bytes(s.data(), n, what);
    return s;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    in_.seekg(static_cast<std::streamoff>(n), std::ios::cur);
    at_ += n;
  }

 private:
  std::string path_;
  uint64_t size_, at_ = 0;
  std::ifstream in_;
};

// A scalar of type t as the variant GgufValue keeps.
decltype(GgufValue::scalar) read_scalar(Reader& r, uint32_t t) {
  switch (t) {
    case kU8: return static_cast<int64_t>(r.get<uint8_t>("a u8"));
    case kI8: return static_cast<int64_t>(r.get<int8_t>("an i8"));
    case kU16: return static_cast<int64_t>(r.get<uint16_t>("a u16"));
    case kI16: return static_cast<int64_t>(r.get<int16_t>("an i16"));
    case kU32: return static_cast<int64_t>(r.get<uint32_t>("a u32"));
    case kI32: return static_cast<int64_t>(r.get<int32_t>("an i32"));
    case kU64: return r.get<uint64_t>("a u64");
    case kI64: return r.get<int64_t>("an i64");
    case kF32: return static_cast<double>(r.get<float>("an f32"));
    case kF64: return r.get<double>("an f64");
    case kBool: {
      const auto b = r.get<uint8_t>("a bool");
      if (b > 1) r.fail("a bool at byte " + std::to_string(r.at() - 1) + " is " + std::to_string(b) + ", not 0 or 1");
      return b == 1;
    }
    case kString: return r.str("a string");
    default: r.fail("unknown metadata value type " + std::to_string(t) + " at byte " + std::to_string(r.at() - 4));
  }
}

double as_number(const decltype(GgufValue::scalar)& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
  return 0.0;
}

// Refuses an array whose items, at `min_bytes` each at least, cannot fit in what is left of the file.
void fits(const Reader& r, const GgufValue& v, uint64_t min_bytes) {
  if (v.items > r.left() / min_bytes)
    r.fail("an array of " + std::to_string(v.items) + " items at byte " + std::to_string(r.at()) + " cannot fit in " +
           "the " + std::to_string(r.left()) + " bytes left (truncated or not GGUF)");
}

// An array's items after its type and count; nested arrays are counted, not kept.
void read_array(Reader& r, GgufValue& v, int depth) {
  if (depth > kMaxArrayDepth) r.fail("arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
  v.item_type = r.get<uint32_t>("an array's item type");
  v.items = r.get<uint64_t>("an array's length");
  const uint64_t fixed = scalar_bytes(v.item_type);
  if (fixed > 0) {
    fits(r, v, fixed);
    v.numbers.reserve(static_cast<size_t>(v.items));
    for (uint64_t i = 0; i < v.items; i++) v.numbers.push_back(as_number(read_scalar(r, v.item_type)));
  } else if (v.item_type == kString) {
    fits(r, v, 8);  // each string at least its length
    v.strings.reserve(static_cast<size_t>(v.items));
    for (uint64_t i = 0; i < v.items; i++) v.strings.push_back(r.str("an array's string"));
  } else if (v.item_type == kArray) {
    fits(r, v, 12);  // each array at least its type and length
    for (uint64_t i = 0; i < v.items; i++) {
      GgufValue inner;
      read_array(r, inner, depth + 1);
    }
  } else {
    r.fail("unknown array item type " + std::to_string(v.item_type) + " at byte " + std::to_string(r.at() - 12));
  }
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// The shortest decimal that reads back as the value: an f32 as a float (1e-05, not 9.99999975e-06).
std::string number_str(double d, bool single) {
  char buf[40];
  const auto [end, ec] = single ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(d))
                                : std::to_chars(buf, buf + sizeof buf, d);
  return ec == std::errc() ? std::string(buf, end) : "?";
}

}  // namespace

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in a float
    const float f = static_cast<float>(man) * 5.9604644775390625e-08f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | sign);
  }
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));  // inf, nan
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

std::string ggml_type_name(uint32_t type) {
  const TypeRow* r = type_row(type);
  return r ? r->name : "type " + std::to_string(type);
}

GgmlTypeSize ggml_type_size(uint32_t type) {
  const TypeRow* r = type_row(type);
  return r ? GgmlTypeSize{r->block, r->bytes} : GgmlTypeSize{};
}

std::string GgufValue::str(size_t max_items) const {
  if (type != kArray) {
    if (const auto* s = std::get_if<std::string>(&scalar)) return quoted(*s);
    if (const auto* b = std::get_if<bool>(&scalar)) return *b ? "true" : "false";
    if (const auto* i = std::get_if<int64_t>(&scalar)) return std::to_string(*i);
    if (const auto* u = std::get_if<uint64_t>(&scalar)) return std::to_string(*u);
    if (const auto* d = std::get_if<double>(&scalar)) return number_str(*d, type == kF32);
    return "?";
  }
  const char* kind = item_type == kString ? "strings" : item_type == kArray ? "arrays"
                     : item_type == kBool ? "bools" : item_type == kF32 || item_type == kF64 ? "floats" : "integers";
  std::string out = "[" + std::to_string(items) + " " + kind;
  const size_t shown = std::min<size_t>(max_items, item_type == kString ? strings.size() : numbers.size());
  for (size_t i = 0; i < shown; i++) {
    out += i == 0 ? ": " : ", ";
    out += item_type == kString ? quoted(strings[i]) : number_str(numbers[i], item_type == kF32);
  }
  if (shown > 0 && shown < items) out += ", ...";
  return out + "]";
}

std::optional<int64_t> GgufValue::integer() const {
  if (const auto* i = std::get_if<int64_t>(&scalar)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&scalar))
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*u);
  return std::nullopt;
}

std::optional<double> GgufValue::number() const {
  if (type == kArray || std::holds_alternative<std::string>(scalar) || std::holds_alternative<bool>(scalar) ||
      std::holds_alternative<std::monostate>(scalar))
    return std::nullopt;
  return as_number(scalar);
}

uint64_t GgufTensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : ne) n *= d;  // bounded when read: the product fits the file's bytes
  return n;
}

std::string GgufTensorInfo::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); i++) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

bool looks_like_gguf(const std::string& path) {
  int fd = -1;
  try {
    fd = open_input_file(path, "");  // never waits on a named pipe (an ifstream's open would block)
  } catch (const IoError&) {
    return false;  // the reader that follows says what is wrong
  }
  char magic[4] = {};
  const ssize_t n = ::read(fd, magic, sizeof magic);
  ::close(fd);
  return n == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufFile::GgufFile(std::string path) : path_(std::move(path)) {
  {
    const int fd = open_input_file(path_, "GGUF file");  // a clear error for a missing file, a pipe, a directory
    struct stat st {};
    const bool sized = ::fstat(fd, &st) == 0;
    ::close(fd);
    AXONN_CHECK_IO(sized, "cannot read the size of '", path_, "'");
    file_bytes_ = static_cast<uint64_t>(st.st_size);
  }
  Reader r(path_, file_bytes_);
  char magic[4];
  r.bytes(magic, 4, "the magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) r.fail("it does not start with \"GGUF\" (not a GGUF file)");
  version_ = r.get<uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    r.fail("version " + std::to_string(version_) + ": this reader knows versions 2 and 3 (version 1, of 2023, " +
           "had 32-bit counts; convert the file with a current llama.cpp)");
  const auto n_tensors = r.get<uint64_t>("the tensor count");
  const auto n_keys = r.get<uint64_t>("the metadata count");
  // each key takes at least 8 + 4 + 1 bytes, each tensor info 8 + 4 + 8 + 4 + 8
  if (n_keys > r.left() / 13) r.fail("it claims " + std::to_string(n_keys) + " metadata keys, more than it can hold");
  if (n_tensors > r.left() / 32) r.fail("it claims " + std::to_string(n_tensors) + " tensors, more than it can hold");

  std::set<std::string, std::less<>> keys;
  for (uint64_t k = 0; k < n_keys; k++) {
    std::string key = r.str("a metadata key");
    if (!keys.insert(key).second) r.fail("the metadata key " + quoted(key) + " appears twice");
    GgufValue v;
    v.type = r.get<uint32_t>("a metadata value's type");
    if (v.type == kArray) read_array(r, v, 1);
    else v.scalar = read_scalar(r, v.type);
    metadata_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    const std::optional<int64_t> n = a->type == kU32 ? a->integer() : std::nullopt;
    if (!n || *n <= 0 || !std::has_single_bit(static_cast<uint64_t>(*n)))
      r.fail("general.alignment is " + a->str() + ": it must be a u32 power of two");
    alignment_ = static_cast<uint64_t>(*n);
  }

  std::set<std::string, std::less<>> names;
  for (uint64_t i = 0; i < n_tensors; i++) {
    GgufTensorInfo t;
    t.name = r.str("a tensor's name");
    if (!names.insert(t.name).second) r.fail("the tensor name " + quoted(t.name) + " appears twice");
    const auto dims = r.get<uint32_t>("a tensor's dimension count");
    if (dims < 1 || dims > 4)
      r.fail("tensor " + quoted(t.name) + " has " + std::to_string(dims) + " dimensions (ggml has 1 to 4)");
    uint64_t elements = 1;
    for (uint32_t d = 0; d < dims; d++) {
      const auto n = r.get<uint64_t>("a tensor's dimension");
      // no ggml type packs more than 8 values in a byte, so this bounds the count (and keeps it from overflowing)
      if (n == 0 || n > file_bytes_ * 8 / elements)
        r.fail("tensor " + quoted(t.name) + "'s dimension " + std::to_string(d) + " is " + std::to_string(n) +
               (n == 0 ? " (empty)" : ", more values than the file can hold"));
      elements *= n;
      t.ne.push_back(n);
    }
    t.type = r.get<uint32_t>("a tensor's type");
    const GgmlTypeSize size = ggml_type_size(t.type);
    if (size.block == 0)
      r.fail("tensor " + quoted(t.name) + " has ggml type " + std::to_string(t.type) + ", which this reader does "
             "not know (its size is unknown)");
    if (t.ne[0] % size.block != 0)
      r.fail("tensor " + quoted(t.name) + "'s rows of " + std::to_string(t.ne[0]) + " values are not whole " +
             ggml_type_name(t.type) + " blocks of " + std::to_string(size.block));
    t.bytes = elements / size.block * size.bytes;
    t.offset = r.get<uint64_t>("a tensor's offset");
    if (t.offset % alignment_ != 0)
      r.fail("tensor " + quoted(t.name) + "'s offset " + std::to_string(t.offset) + " is not a multiple of the " +
             "alignment " + std::to_string(alignment_));
    tensors_.push_back(std::move(t));
  }
  data_offset_ = (r.at() + alignment_ - 1) / alignment_ * alignment_;
  if (data_offset_ > file_bytes_ && !tensors_.empty())
    r.fail("the tensors' data would start at byte " + std::to_string(data_offset_) + ", past the end of the file");
  for (GgufTensorInfo& t : tensors_) {
    const uint64_t room = file_bytes_ - std::min(file_bytes_, data_offset_);
    if (t.offset > room || t.bytes > room - t.offset)
      r.fail("tensor " + quoted(t.name) + "'s " + std::to_string(t.bytes) + " bytes at data offset " +
             std::to_string(t.offset) + " run past the end of the file (" + std::to_string(file_bytes_) +
             " bytes; truncated?)");
    t.offset += data_offset_;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<float> GgufFile::read_floats(const GgufTensorInfo& t) const { return read_floats(t, 0, t.elements()); }

std::vector<float> GgufFile::read_floats(const GgufTensorInfo& t, uint64_t first, uint64_t count) const {
  AXONN_CHECK_ARG(t.type == 0 || t.type == 1 || t.type == 8 || t.type == 30, "GGUF file '", path_, "': tensor '",
                  t.name, "' is ", ggml_type_name(t.type), "; axonn reads F32, F16, BF16 and Q8_0 tensors");
  const GgmlTypeSize size = ggml_type_size(t.type);
  AXONN_CHECK(first % size.block == 0 && count % size.block == 0 && first <= t.elements() &&
                  count <= t.elements() - first,
              "read_floats: values [", first, ", ", first + count, ") of '", t.name, "' are not whole blocks within its ",
              t.elements());
  if (count == 0) return {};
  // the range mapped for this read alone (no copy into a buffer first; its pages leave this process's memory
  // when it is unmapped, the file staying in the page cache)
  const uint64_t at = t.offset + first / size.block * size.bytes, bytes = count / size.block * size.bytes;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)), map_at = at / page * page;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  const bool whole = fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= at + bytes;
  void* map = whole ? ::mmap(nullptr, at + bytes - map_at, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(map_at))
                    : nullptr;
  const int map_errno = errno;
  if (fd >= 0) ::close(fd);
  AXONN_CHECK_IO(map != nullptr && map != MAP_FAILED, "cannot read tensor '", t.name, "' of '", path_, "' (", bytes,
                 " bytes at ", at, "): ", whole ? std::strerror(map_errno) : "the file changed since it was opened?");
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { if (p) ::munmap(p, n); }
  } unmap{map, static_cast<size_t>(at + bytes - map_at)};
  const uint64_t n = count;
  std::vector<float> out(static_cast<size_t>(n));
  const char* p = static_cast<const char*>(map) + (at - map_at);
  uint16_t h = 0;
  switch (t.type) {
    case 0: std::memcpy(out.data(), p, 4 * n); break;
    case 1:
      for (uint64_t i = 0; i < n; i++) {
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    case 30:
      for (uint64_t i = 0; i < n; i++) {
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      break;
    default:  // Q8_0: per 32 values an f16 scale and 32 int8s
      for (uint64_t b = 0; b < n / 32; b++) {
        const char* block = p + b * 34;
        std::memcpy(&h, block, 2);
        const float d = f16_to_f32(h);
        for (uint64_t i = 0; i < 32; i++) out[b * 32 + i] = d * static_cast<float>(static_cast<int8_t>(block[2 + i]));
      }
  }
  return out;
}

}  // namespace axonn::checkpoint
