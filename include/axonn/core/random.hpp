// core/random.hpp — the one mixing function of the counter-based generators (initialisation,
// shuffling, sampling): each value is a function of its key alone, the same on every rank and grid.
#pragma once

#include <cstdint>

namespace axonn {

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a bijection of 64-bit words that mixes every bit.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace axonn
