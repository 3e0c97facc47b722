#!/usr/bin/env python3
"""Writes a deterministic int8 .npy [B, T, I] (xorshift32 bytes; no numpy needed), the input of
a test whose expected output a build step then computes (tests/meson.build, int8_channel_header).

    make_int8_sample.py OUT.npy B T I [SEED]
"""
import struct
import sys


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    out, (b, t, i) = sys.argv[1], (int(v) for v in sys.argv[2:5])
    state = int(sys.argv[5]) if len(sys.argv) == 6 else 2463534242
    data = bytearray()
    for _ in range(b * t * i):
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        data.append(state & 0xFF)
    header = "{'descr': '|i1', 'fortran_order': False, 'shape': (%d, %d, %d), }" % (b, t, i)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"  # the data starts at a multiple of 64
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + bytes(data))


if __name__ == "__main__":
    main()
