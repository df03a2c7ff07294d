#!/usr/bin/python3
"""Turns a QR code read off a terminal screen into a PNG a QR decoder can read.

Usage: halfblock_png.py OUTPUT.png < ROWS
Each character cell of ROWS is one module wide and two modules tall, drawn as
devtrust draws them for a dark terminal: the character's foreground is a light
module, the background a dark one ("█" both light, "▀" light over dark, "▄"
dark over light, " " both dark). Each module becomes SCALE x SCALE pixels, with
a light margin of MARGIN modules around the code (a scanner's quiet zone).
Python's standard library only (zlib for the PNG's compression).
"""
import struct
import sys
import zlib

SCALE = 8
MARGIN = 4
HALVES = {"█": (1, 1), "▀": (1, 0), "▄": (0, 1), " ": (0, 0)}


def modules(rows):
    """Rows of modules, 1 for light, from rows of half-block characters."""
    grid = []
    for row in rows:
        pairs = [HALVES[character] for character in row]
        grid.append([top for top, _ in pairs])
        grid.append([bottom for _, bottom in pairs])
    return grid


def png(grid):
    width = len(grid[0]) + 2 * MARGIN
    padded = [[1] * width for _ in range(MARGIN)] + [[1] * MARGIN + row + [1] * MARGIN for row in grid] + [[1] * width for _ in range(MARGIN)]
    raw = b"".join(b"\x00" + bytes(255 * module for module in row for _ in range(SCALE)) for row in padded for _ in range(SCALE))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width * SCALE, len(padded) * SCALE, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def main():
    rows = [line.rstrip("\n") for line in sys.stdin if line.strip("\n")]
    if not rows or len({len(row) for row in rows}) != 1:
        sys.exit("halfblock_png.py: expected rows of equal length")
    with open(sys.argv[1], "wb") as output:
        output.write(png(modules(rows)))


if __name__ == "__main__":
    main()
