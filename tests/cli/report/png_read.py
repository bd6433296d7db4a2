"""A PNG reader in the standard library alone (zlib, struct): 8-bit greyscale, RGB, RGBA, non-interlaced,
as Chromium's screenshots are. read_png(path) -> (width, height, channels, rows), rows a list of bytes."""
import struct
import zlib


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path
    at, idat, ihdr = 8, [], None
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        at += 12 + n
    width, height, depth, color, _, _, interlace = ihdr
    assert depth == 8 and interlace == 0 and color in (0, 2, 6), "unsupported PNG %s" % (ihdr,)
    channels = {0: 1, 2: 3, 6: 4}[color]
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:  # Sub
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 255
        elif kind == 2:  # Up: bytewise sums of two rows at once, as big integers without carries between bytes
            a, b = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            low = int.from_bytes(b"\x7f" * stride, "big")
            line = bytearray((((a & low) + (b & low)) ^ ((a ^ b) & ~low & ((1 << (8 * stride)) - 1))).to_bytes(stride, "big"))
        elif kind == 3:  # Average
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:  # Paeth
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b, c = prev[i], (prev[i - channels] if i >= channels else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def write_png(path, width, height, channels, rows):
    """The inverse (filter None), for crops when looking at a screenshot by hand."""
    color = {1: 0, 3: 2, 4: 6}[channels]
    raw = b"".join(b"\x00" + r for r in rows)
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
