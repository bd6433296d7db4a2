// model/goldfish.hpp — the Goldfish loss's drop mask (Hans et al., arXiv 2406.10209; spec §8.2,
// docs/goldfish.md): which targets of a sequence leave the training loss.
//
// The mask is a function of the targets alone. The hash strategies decide target p of a row from the
// h targets ending at p (targets[p-h+1 .. p], the predicted token and the h-1 before it), so an
// h-gram gets the same decision wherever it occurs, and the first h-1 targets of a row are never
// dropped; about 1/k of the others are.
//
//   model::GoldfishConfig g;  g.k = 4;  g.h = 13;         // hash-avalanche
//   model::GoldfishMask mask(g);                          // InvalidArgument / IoError (hash-table)
//   std::vector<uint8_t> keep(rows * T);
//   int64_t kept = mask.apply(targets, rows, T, keep.data());  // keep[i]: 1 kept, 0 dropped
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace axonn::model {

enum class GoldfishStrategy {
  kHashAvalanche,  // drop iff hashint32(product of the h-gram) < (2^32 - 1) / k: pure integer arithmetic
  kStatic,         // drop positions start, start + k, start + 2k, ... of every row (ignores h)
  kHashTable,      // drop iff table[product mod table size] < 1/k: the authors' released runs' rule
};
// "hash-avalanche", "static", "hash-table"
const char* goldfish_strategy_name(GoldfishStrategy s);
// The strategy of its name; InvalidArgument naming --goldfish-strategy and the choices.
GoldfishStrategy parse_goldfish_strategy(const std::string& name);

struct GoldfishConfig {
  int k = 0;  // 0: off (the standard loss); else >= 2: about 1/k of the targets are dropped
  int h = 13;  // context width of the hash strategies (the released models' 13)
  GoldfishStrategy strategy = GoldfishStrategy::kHashAvalanche;
  int start = 0;      // static: the first dropped position
  std::string table;  // hash-table: the table's file (format in docs/goldfish.md)
  bool enabled() const { return k != 0; }
};

// The authors' 32-bit-masked Thomas Wang mix of a 64-bit key (spec §13.1(7): hashint32(0) = 791250447).
uint32_t goldfish_hashint32(uint64_t key);

// The hash table of strategy hash-table: a file of n >= 1 little-endian IEEE-754 float32 values in
// [0, 1), nothing else (the authors' is torch.rand(1000003) from a generator seeded 2971215073, written
// with numpy's tofile; docs/goldfish.md). IoError when unreadable, InvalidArgument when malformed.
std::vector<float> load_goldfish_table(const std::string& path);

class GoldfishMask {
 public:
  // Checks the config (InvalidArgument naming the flag: k >= 2, h >= 1, start >= 0; a table file for
  // hash-table) and loads the table.
  explicit GoldfishMask(const GoldfishConfig& config);
  const GoldfishConfig& config() const { return config_; }

  // Whether target p of a row of targets (row[0 .. p] read) is dropped.
  bool dropped(const int* row, int p) const;
  // keep[r * T + p] = 0 where target p of row r is dropped, else 1, for `rows` rows of T targets;
  // returns the number kept.
  int64_t apply(const int* targets, int64_t rows, int T, uint8_t* keep) const;

 private:
  GoldfishConfig config_;
  std::vector<float> table_;
};

}  // namespace axonn::model
