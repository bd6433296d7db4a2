#!/usr/bin/python3
# Goldfish drop decisions on fixed token rows, written from the algorithm of ../shared/spec/axonn.md §8.2
# and models-text-goldfish.md §1.2 (not from our C++): an independent oracle for tests/unit/model
# (test_goldfish.cpp). Python integers, reduced modulo 2^64 where the authors' uint64/int64 tensors wrap.
# Run from this directory: ./gen_goldfish_golden.py > drops.txt (it also writes table-1009.f32, the
# hash-table cases' table)
import random
import struct

U64 = (1 << 64) - 1
M32 = (1 << 32) - 1


def hashint32(key):
    """Thomas Wang's 64-bit mix as the authors apply it to uint64 tensors, masked to 32 bits."""
    x = key & U64
    x = ((~x & U64) + (x << 21)) & U64 & M32
    x = ((x << 21) - x - 1) & U64
    x ^= x >> 24
    x = (x + (x << 3) + (x << 8)) & U64 & M32
    x = (x * 265) & U64
    x ^= x >> 14
    x = (x + (x << 2) + (x << 4)) & U64 & M32
    x = (x * 21) & U64
    x ^= x >> 28
    x = (x + (x << 31)) & U64 & M32
    return x


def dropped_avalanche(row, k, h):
    out = []
    for p in range(h - 1, len(row)):
        key = 1
        for t in row[p - h + 1:p + 1]:
            key = (key * t) & U64  # int64 product, wrapping; its bits as uint64
        if hashint32(key) < M32 / k:  # (2^32 - 1) / k as a real number
            out.append(p)
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def dropped_table(row, k, h, table):
    out = []
    for p in range(h - 1, len(row)):
        key = 1
        for t in row[p - h + 1:p + 1]:
            key = (key * t) & U64
        signed = key - (1 << 64) if key >> 63 else key  # the authors' int64 product
        if table[signed % len(table)] < f32(1.0 / k):  # PyTorch's % takes the divisor's sign; float32 compare
            out.append(p)
    return out


def dropped_static(T, k, start):
    return list(range(start, T, k))


# the spec's vectors must come out of this oracle (spec §13.1(7), models-text-goldfish.md §1.5)
assert [hashint32(x) for x in (0, 1, 2, 3, 210, 12345, 2**32 - 1, 2**63, 1422948384)] == [
    791250447, 4151993710, 2228655750, 1987753757, 574884826, 1193736519, 58270011, 791250447, 2460261570]
assert dropped_avalanche(list(range(1, 21)), 4, 4) == [3, 6, 11, 12, 19]
assert dropped_avalanche(list(range(1, 21)), 4, 13) == [15, 16]
GPT2 = [50256, 464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 50256, 464, 2068, 7586, 21831]
assert dropped_avalanche(GPT2, 4, 4) == [4, 5, 15]
assert dropped_static(16, 4, 0) == [0, 4, 8, 12]

rows = [("counting", list(range(1, 21))), ("gpt2", GPT2)]
rng = random.Random(20240610)
rows.append(("random-gpt2-vocab", [rng.randrange(50257) for _ in range(96)]))
rows.append(("random-small-vocab", [rng.randrange(1, 7) for _ in range(96)]))  # repeated h-grams
rows.append(("random-llama3-vocab", [rng.randrange(128256) for _ in range(96)]))

# a small hash table in the format of docs/goldfish.md (little-endian float32 in [0, 1), no header);
# the values are multiples of 2^-24, exact in float32
table = [rng.getrandbits(24) / (1 << 24) for _ in range(1009)]
with open("table-1009.f32", "wb") as f:
    f.write(struct.pack(f"<{len(table)}f", *table))

print("# Goldfish drop decisions: strategy k h start | targets | dropped positions (gen_goldfish_golden.py)")
for name, row in rows:
    for h in (4, 13):
        for k in (2, 4, 8):
            d = dropped_avalanche(row, k, h)
            print(f"hash-avalanche {k} {h} 0 | {' '.join(map(str, row))} | {' '.join(map(str, d))}")
    for h in (4, 13):
        for k in (2, 4):
            d = dropped_table(row, k, h, table)
            print(f"hash-table {k} {h} 0 | {' '.join(map(str, row))} | {' '.join(map(str, d))}")
    for k, start in ((4, 0), (3, 2)):
        d = dropped_static(len(row), k, start)
        print(f"static {k} 13 {start} | {' '.join(map(str, row))} | {' '.join(map(str, d))}")
