"""GPT-2's byte-level alphabet (openai/gpt-2 encoder.py bytes_to_unicode, spec
models-text-goldfish.md §3.3), for the Python checkers that read GPT-2 tokens independently of axonn:
bytes 33..126, 161..172 and 174..255 stand for themselves, the other 68 for 256, 257, ... in order."""


def byte_of_character():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}
