// model/goldfish.cpp — the Goldfish drop mask (include/axonn/model/goldfish.hpp).
#include "axonn/model/goldfish.hpp"

#include <cmath>
#include <cstring>
#include <fstream>

#include "axonn/core/error.hpp"

namespace axonn::model {

const char* goldfish_strategy_name(GoldfishStrategy s) {
  switch (s) {
    case GoldfishStrategy::kHashAvalanche: return "hash-avalanche";
    case GoldfishStrategy::kStatic: return "static";
    case GoldfishStrategy::kHashTable: return "hash-table";
  }
  return "?";
}

GoldfishStrategy parse_goldfish_strategy(const std::string& name) {
  for (GoldfishStrategy s : {GoldfishStrategy::kHashAvalanche, GoldfishStrategy::kStatic, GoldfishStrategy::kHashTable})
    if (name == goldfish_strategy_name(s)) return s;
  throw InvalidArgument("--goldfish-strategy wants hash-avalanche, static or hash-table, got '" + name + "'");
}

uint32_t goldfish_hashint32(uint64_t key) {
  // The authors' steps on uint64 (wrapping), masked to 32 bits where they mask: only the key's low 32
  // bits matter (the first step masks).
  constexpr uint64_t mask = 0xffffffffULL;
  uint64_t x = (~key + (key << 21)) & mask;
  x = (x << 21) - x - 1;
  x = x ^ (x >> 24);
  x = (x + (x << 3) + (x << 8)) & mask;
  x = x * 265;
  x = x ^ (x >> 14);
  x = (x + (x << 2) + (x << 4)) & mask;
  x = x * 21;
  x = x ^ (x >> 28);
  x = (x + (x << 31)) & mask;
  return static_cast<uint32_t>(x);
}

std::vector<float> load_goldfish_table(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw IoError("--goldfish-table: cannot open '" + path + "'");
  const std::streamoff bytes = in.tellg();
  AXONN_CHECK_ARG(bytes > 0 && bytes % 4 == 0, "--goldfish-table '", path, "' has ", bytes,
                  " bytes; it must hold n >= 1 little-endian float32 values (4n bytes, no header; docs/goldfish.md)");
  std::vector<float> table(static_cast<size_t>(bytes / 4));
  in.seekg(0);
  std::vector<unsigned char> raw(static_cast<size_t>(bytes));
  if (!in.read(reinterpret_cast<char*>(raw.data()), bytes)) throw IoError("--goldfish-table: cannot read '" + path + "'");
  for (size_t i = 0; i < table.size(); i++) {
    const uint32_t u = static_cast<uint32_t>(raw[4 * i]) | static_cast<uint32_t>(raw[4 * i + 1]) << 8 |
                       static_cast<uint32_t>(raw[4 * i + 2]) << 16 | static_cast<uint32_t>(raw[4 * i + 3]) << 24;
    float v;
    static_assert(sizeof v == sizeof u);
    std::memcpy(&v, &u, sizeof v);
    AXONN_CHECK_ARG(std::isfinite(v) && v >= 0.0f && v < 1.0f, "--goldfish-table '", path, "': value ", i, " is ", v,
                    "; every value must be a float32 in [0, 1) (docs/goldfish.md)");
    table[i] = v;
  }
  return table;
}

GoldfishMask::GoldfishMask(const GoldfishConfig& config) : config_(config) {
  AXONN_CHECK_ARG(config.k >= 2, "--goldfish-k must be >= 2 (about 1/k of the targets are dropped), got ", config.k);
  AXONN_CHECK_ARG(config.h >= 1, "--goldfish-h must be >= 1 (the hashed context width), got ", config.h);
  AXONN_CHECK_ARG(config.start >= 0, "--goldfish-start must be >= 0, got ", config.start);
  const bool table = config.strategy == GoldfishStrategy::kHashTable;
  AXONN_CHECK_ARG(table == !config.table.empty(), table ? "--goldfish-strategy hash-table needs --goldfish-table FILE"
                                                        : "--goldfish-table is the table of --goldfish-strategy hash-table; "
                                                          "add that strategy or drop the table");
  if (table) table_ = load_goldfish_table(config.table);
}

bool GoldfishMask::dropped(const int* row, int p) const {
  const int k = config_.k, h = config_.h;
  if (config_.strategy == GoldfishStrategy::kStatic) return p >= config_.start && (p - config_.start) % k == 0;
  if (p < h - 1) return false;
  // the product of the h-gram ending at p, wrapping as the authors' int64 product
  uint64_t key = 1;
  for (int j = p - h + 1; j <= p; j++) key *= static_cast<uint64_t>(static_cast<int64_t>(row[j]));
  if (config_.strategy == GoldfishStrategy::kHashAvalanche)
    return static_cast<uint64_t>(goldfish_hashint32(key)) * static_cast<uint64_t>(k) < 0xffffffffULL;  // < (2^32-1)/k
  // hash-table: the signed product's non-negative remainder (PyTorch's %), compared in float32
  const int64_t size = static_cast<int64_t>(table_.size());
  int64_t index = static_cast<int64_t>(key) % size;
  if (index < 0) index += size;
  return table_[static_cast<size_t>(index)] < static_cast<float>(1.0 / k);
}

int64_t GoldfishMask::apply(const int* targets, int64_t rows, int T, uint8_t* keep) const {
  int64_t kept = 0;
  for (int64_t r = 0; r < rows; r++) {
    const int* row = targets + r * T;
    for (int p = 0; p < T; p++) {
      const bool drop = dropped(row, p);
      keep[r * T + p] = drop ? 0 : 1;
      kept += drop ? 0 : 1;
    }
  }
  return kept;
}

}  // namespace axonn::model
