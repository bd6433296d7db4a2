// safetensors reader/writer: every dtype round-trips bit for bit, and every malformation is refused
// with an IoError that names the file and the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/core/error.hpp"
#include "llmc_files.hpp"

using namespace axonn;
using checkpoint::SafetensorsFile;
using checkpoint::SafetensorsWriter;

namespace {

std::vector<char> slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A file from a header text and `data_bytes` bytes of data (the length field is the header's size
// unless `len` overrides it).
std::string craft(const test::TempDir& d, const std::string& name, const std::string& header, size_t data_bytes,
                  std::optional<uint64_t> len = std::nullopt) {
  std::vector<char> b(8);
  uint64_t n = len.value_or(header.size());
  for (int i = 0; i < 8; i++) b[i] = static_cast<char>(n >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; i++) b.push_back(static_cast<char>(i));
  test::write_bytes(d.file(name), b);
  return d.file(name);
}

// Opening `path` must throw an IoError whose message names the file and contains `needle`.
void expect_rejected(const std::string& path, const std::string& needle) {
  try {
    SafetensorsFile f(path);
    ADD_FAILURE() << "no error for " << path << " (expected '" << needle << "')";
  } catch (const IoError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(needle), std::string::npos) << m;
    EXPECT_NE(m.find(path), std::string::npos) << "message does not name the file: " << m;
  }
}

}  // namespace

TEST(Safetensors, RoundTripsEveryDtype) {
  test::TempDir d;
  std::vector<float> f32 = {1.5f, -2.0f, 3.25f, 1e-30f, -0.0f, 7.0f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80, 0x0001};
  std::vector<int32_t> i32 = {-1, 2147483647, 0};
  std::vector<int64_t> i64 = {-9000000000000000000LL, 42};
  std::vector<uint16_t> u16 = {65535, 0, 50256, 7, 9};
  float scalar = 0.125f;
  SafetensorsWriter w;
  w.add("a.f32", DType::kF32, {2, 3}, f32.data());
  w.add("b.bf16", DType::kBF16, {4}, bf16.data());
  w.add("c.i32", DType::kI32, {3, 1}, i32.data());
  w.add("d.i64", DType::kI64, {2}, i64.data());
  w.add("e.u16", DType::kU16, {5}, u16.data());
  w.add("f.scalar", DType::kF32, {}, &scalar);
  w.add("g.empty", DType::kF32, {0, 3}, nullptr);
  w.set_metadata("format", "pt");
  w.set_metadata("note", "ünïcode ✓");
  checkpoint::FileDigest dg = w.write(d.file("x.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(d.file("x.safetensors.tmp")));
  EXPECT_EQ(dg.bytes, std::filesystem::file_size(d.file("x.safetensors")));
  EXPECT_EQ(dg.bytes, w.file_bytes());
  EXPECT_EQ(dg, checkpoint::digest_file(d.file("x.safetensors")));

  SafetensorsFile f(d.file("x.safetensors"));
  EXPECT_EQ((8 + f.header_bytes()) % 8, 0u) << "data section should start 8-byte aligned";
  ASSERT_EQ(f.tensors().size(), 7u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "ünïcode ✓");
  auto same = [&](const char* name, DType dt, std::vector<int64_t> shape, const void* data, size_t bytes) {
    const checkpoint::TensorInfo& t = f.get(name);
    EXPECT_EQ(t.dtype, dt) << name;
    EXPECT_EQ(t.shape, shape) << name;
    ASSERT_EQ(t.bytes(), bytes) << name;
    EXPECT_EQ(bytes == 0 ? 0 : std::memcmp(f.data(t), data, bytes), 0) << name;
  };
  same("a.f32", DType::kF32, {2, 3}, f32.data(), 24);
  same("b.bf16", DType::kBF16, {4}, bf16.data(), 8);
  same("c.i32", DType::kI32, {3, 1}, i32.data(), 12);
  same("d.i64", DType::kI64, {2}, i64.data(), 16);
  same("e.u16", DType::kU16, {5}, u16.data(), 10);
  same("f.scalar", DType::kF32, {}, &scalar, 4);
  same("g.empty", DType::kF32, {0, 3}, nullptr, 0);
  // tensors are reported in data order, which is the order they were added
  EXPECT_EQ(f.tensors().front().name, "a.f32");
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_TRUE(checkpoint::looks_like_safetensors(d.file("x.safetensors")));
}

TEST(Safetensors, ReadChecksShapeAndDtypeAndWidensBf16) {
  test::TempDir d;
  std::vector<float> v = {1.0f, -2.5f, 3.0f, 0.5f};
  std::vector<uint16_t> b(4);
  for (size_t i = 0; i < 4; i++) b[i] = f32_to_bf16(v[i]);
  SafetensorsWriter w;
  w.add("v", DType::kF32, {2, 2}, v.data());
  w.add("b", DType::kBF16, {4}, b.data());
  w.write(d.file("r.safetensors"));
  SafetensorsFile f(d.file("r.safetensors"));

  std::vector<float> out(4);
  f.read("v", Tensor(out.data(), {2, 2}));
  EXPECT_EQ(out, v);
  std::fill(out.begin(), out.end(), 0.0f);
  f.read("b", Tensor(out.data(), {4}));  // bf16 -> f32, exact for these values
  EXPECT_EQ(out, v);
  EXPECT_THROW(f.read("v", Tensor(out.data(), {4})), IoError);                  // shape
  EXPECT_THROW(f.read("v", Tensor(out.data(), {2, 2}, DType::kI32)), IoError);  // dtype
  try {
    f.read("missing", Tensor(out.data(), {4}));
    ADD_FAILURE();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("has no tensor 'missing'"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WriterRefusesBadInput) {
  float x = 0;
  SafetensorsWriter w;
  w.add("a", DType::kF32, {1}, &x);
  EXPECT_THROW(w.add("a", DType::kF32, {1}, &x), InvalidArgument);
  EXPECT_THROW(w.add("", DType::kF32, {1}, &x), InvalidArgument);
  EXPECT_THROW(w.add("__metadata__", DType::kF32, {1}, &x), InvalidArgument);
  EXPECT_THROW(w.add("neg", DType::kF32, {-1}, &x), InvalidArgument);
  EXPECT_THROW(w.add("nodata", DType::kF32, {2}, nullptr), InvalidArgument);
  test::TempDir d;
  EXPECT_THROW(w.write(d.file("no/such/dir/x.safetensors")), IoError);
}

TEST(Safetensors, ReplacesAnExistingFileAtomically) {
  test::TempDir d;
  float a = 1, b = 2;
  SafetensorsWriter w1, w2;
  w1.add("x", DType::kF32, {1}, &a);
  w2.add("y", DType::kF32, {1}, &b);
  w1.write(d.file("f.safetensors"));
  w2.write(d.file("f.safetensors"));
  SafetensorsFile f(d.file("f.safetensors"));
  EXPECT_EQ(f.tensors().size(), 1u);
  EXPECT_NE(f.find("y"), nullptr);
}

TEST(Safetensors, RejectsEveryMalformation) {
  test::TempDir d;
  // The well-formed baseline: two F32 tensors of 8 bytes each.
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  SafetensorsFile good(craft(d, "good", ok, 16));
  EXPECT_EQ(good.tensors().size(), 2u);

  // file and header length
  test::write_bytes(d.file("empty"), {});
  expect_rejected(d.file("empty"), "too short");
  test::write_bytes(d.file("five"), {1, 2, 3, 4, 5});
  expect_rejected(d.file("five"), "too short");
  expect_rejected(craft(d, "len_past_end", ok, 16, ok.size() + 100), "runs past the end of the file");
  expect_rejected(craft(d, "len_huge", ok, 16, uint64_t{1} << 40), "exceeds the format's limit");
  expect_rejected(craft(d, "len_zero", ok, 16, 0), "too small");
  // truncated: the header promises 16 bytes of data, the file has 12
  expect_rejected(craft(d, "truncated", ok, 12), "past the end of the data");
  // the length field cuts the JSON short
  expect_rejected(craft(d, "len_short", ok, 16, ok.size() - 5), "not valid JSON");

  // JSON
  expect_rejected(craft(d, "bad_json", R"({"a":{"dtype":"F32",)", 0), "not valid JSON");
  expect_rejected(craft(d, "not_object", R"([1, 2])", 0), "does not start with '{'");
  expect_rejected(craft(d, "entry_not_object", R"({"a": 3})", 0), "is not an object");
  expect_rejected(craft(d, "metadata_number", R"({"__metadata__":{"n":3}})", 0), "is not a string");
  expect_rejected(craft(d, "metadata_array", R"({"__metadata__":[1]})", 0), "__metadata__ is not an object");

  // entries
  expect_rejected(craft(d, "dtype_unknown", R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4),
                  "has dtype 'F16'");
  expect_rejected(craft(d, "dtype_missing", R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8), "no dtype");
  expect_rejected(craft(d, "shape_missing", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8), "no shape");
  expect_rejected(craft(d, "shape_negative", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
                  "not a non-negative integer");
  expect_rejected(craft(d, "shape_float", R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
                  "not a non-negative integer");
  expect_rejected(craft(d, "offsets_missing", R"({"a":{"dtype":"F32","shape":[2]}})", 8), "data_offsets");
  expect_rejected(craft(d, "offsets_three", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8),
                  "data_offsets");
  expect_rejected(craft(d, "offsets_reversed", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
                  "begin > end");
  expect_rejected(craft(d, "offsets_out_of_range", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8),
                  "past the end of the data");
  // wrong dtype size: 2 F32 elements are 8 bytes, the range is 6; and I64 over 8 bytes for 2 elements
  expect_rejected(craft(d, "size_mismatch", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,6]}})", 6),
                  "span 6 bytes");
  expect_rejected(craft(d, "dtype_size", R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,8]}})", 8),
                  "span 8 bytes");
  expect_rejected(
      craft(d, "shape_overflow", R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
      "overflows");

  // layout of the data section
  expect_rejected(craft(d, "overlap",
                        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        12),
                  "overlaps tensor 'a'");
  expect_rejected(craft(d, "gap",
                        R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                        12),
                  "belong to no tensor");
  expect_rejected(craft(d, "trailing", ok, 20), "after the last tensor");
  // a duplicated key: JSON keeps the last, the first tensor's bytes become a gap
  expect_rejected(craft(d, "duplicate",
                        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                        16),
                  "belong to no tensor");

  // a real file with bytes cut off its end
  std::vector<char> full = slurp(d.file("good"));
  test::write_bytes(d.file("cut"), std::vector<char>(full.begin(), full.end() - 1));
  expect_rejected(d.file("cut"), "past the end of the data");
  expect_rejected(d.file("does-not-exist"), "cannot open");
  EXPECT_FALSE(checkpoint::looks_like_safetensors(d.file("does-not-exist")));
  EXPECT_FALSE(checkpoint::looks_like_safetensors(d.file("five")));
}
