#!/usr/bin/python3
"""Draws a terminal screen as a person sees it, as a PNG a QR decoder can read.

Usage: halfblock_png.py --background dark|light OUTPUT.png < SCREEN
Prints {"size": N, "quietZone": Q} as JSON: the QR code found on the screen (by
the top row of its finder patterns, 7 dark modules with light on either side)
is N modules square, with Q light modules all around it (up to 8); or
{"size": null} when there is none.
SCREEN is the screen as `tmux capture-pane -p -e -N` gives it: rows of text
with the escape sequences of their colours (SGR), whose state carries on from
one row to the next. The terminal's own colours (for text that sets none) are
those of a dark theme (light grey on near-black) or a light one (near-black on
white); the 16 colours and the 256-colour palette are xterm's.

Each character cell is one module wide and two tall: "█" is its foreground
colour in both halves, "▀" foreground over background, "▄" background over
foreground; every other character (text) is drawn as its background. Each
module becomes SCALE x SCALE pixels. Around the screen, a margin of MARGIN
cells in the terminal's background (the window's padding): nothing lightens
what the screen itself shows, so a QR code needs its own quiet zone.
Python's standard library only (zlib for the PNG's compression).
"""
import json
import re
import struct
import sys
import zlib

SCALE = 4
MARGIN = 2
THEMES = {"dark": ((204, 204, 204), (24, 24, 24)), "light": ((24, 24, 24), (255, 255, 255))}
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
OTHER_ESCAPE = re.compile(r"\x1b(\[[0-9;:?]*[A-Za-z]|\][^\x07\x1b]*(\x07|\x1b\\)|.)")


def palette(index):
    """xterm's 256 colours."""
    base = [(0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205), (229, 229, 229),
            (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255), (255, 0, 255), (0, 255, 255), (255, 255, 255)]
    if index < 16:
        return base[index]
    if index < 232:
        index -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[index // 36], steps[index // 6 % 6], steps[index % 6])
    grey = 8 + 10 * (index - 232)
    return (grey, grey, grey)


class Attributes:
    def __init__(self):
        self.reset()

    def reset(self):
        self.foreground = None
        self.background = None
        self.reverse = False

    def apply(self, parameters):
        codes = [int(code) if code else 0 for code in re.split("[;:]", parameters)] if parameters else [0]
        position = 0
        while position < len(codes):
            code = codes[position]
            position += 1
            if code == 0:
                self.reset()
            elif code == 7:
                self.reverse = True
            elif code == 27:
                self.reverse = False
            elif 30 <= code <= 37:
                self.foreground = palette(code - 30)
            elif 90 <= code <= 97:
                self.foreground = palette(code - 90 + 8)
            elif code == 39:
                self.foreground = None
            elif 40 <= code <= 47:
                self.background = palette(code - 40)
            elif 100 <= code <= 107:
                self.background = palette(code - 100 + 8)
            elif code == 49:
                self.background = None
            elif code in (38, 48):
                if codes[position] == 5:
                    colour = palette(codes[position + 1])
                    position += 2
                else:
                    colour = tuple(codes[position + 1:position + 4])
                    position += 4
                if code == 38:
                    self.foreground = colour
                else:
                    self.background = colour

    def colours(self, theme):
        foreground = self.foreground or theme[0]
        background = self.background or theme[1]
        return (background, foreground) if self.reverse else (foreground, background)


def cells(screen, theme):
    """Rows of (top, bottom) colours, one per character cell."""
    attributes = Attributes()
    rows = []
    for line in screen.split("\n"):
        row = []
        position = 0
        while position < len(line):
            sgr = SGR.match(line, position)
            if sgr:
                attributes.apply(sgr.group(1))
                position = sgr.end()
                continue
            other = OTHER_ESCAPE.match(line, position)
            if other:
                position = other.end()
                continue
            character = line[position]
            position += 1
            foreground, background = attributes.colours(theme)
            row.append({"█": (foreground, foreground), "▀": (foreground, background), "▄": (background, foreground)}.get(character, (background, background)))
        rows.append(row)
    return rows


def modules(rows, theme):
    """Rows of module colours, the screen with its margin."""
    background = theme[1]
    width = max(len(row) for row in rows) + 2 * MARGIN
    padded = [[]] * MARGIN + rows + [[]] * MARGIN
    grid = []
    for row in padded:
        full = [(background, background)] * MARGIN + row + [(background, background)] * (width - MARGIN - len(row))
        grid.append([top for top, _ in full])
        grid.append([bottom for _, bottom in full])
    return grid


def quiet_zone(grid):
    """The QR code's size and the light margin around it, as a scanner sees them (dark: luminance below half)."""
    dark = [[sum(colour) < 3 * 128 for colour in row] for row in grid]

    finder = ["1111111", "1000001", "1011101", "1011101", "1011101", "1000001", "1111111"]

    def is_finder(top, left):
        """A whole 7x7 finder pattern with its light separator, not just a run of 7 dark cells: big
        letters drawn beside the code have such runs too (two T's in "THRG-MZPT")."""
        if top < 1 or left < 1 or top + 8 > len(dark) or left + 8 > len(dark[0]):
            return False
        for dy in range(-1, 8):
            for dx in range(-1, 8):
                inside = 0 <= dy < 7 and 0 <= dx < 7
                expected = inside and finder[dy][dx] == "1"
                if dark[top + dy][left + dx] != expected:
                    return False
        return True

    for top, row in enumerate(dark):
        starts = [left for left in range(1, len(row) - 7) if is_finder(top, left)]
        # The top-left and top-right finders on this row, with the bottom-left one below the first.
        pair = next(((left, right) for left in starts for right in starts
                     if right > left and is_finder(top + (right - left), left)), None)
        if pair is None:
            continue
        left, right = pair[0], pair[1] + 6
        size = right - left + 1
        bottom = top + size - 1
        quiet = 0
        while quiet < 8:
            ring = quiet + 1
            if top - ring < 0 or left - ring < 0 or bottom + ring >= len(dark) or right + ring >= len(row):
                break
            cells = [(top - ring, x) for x in range(left - ring, right + ring + 1)] + [(bottom + ring, x) for x in range(left - ring, right + ring + 1)]
            cells += [(y, left - ring) for y in range(top - ring, bottom + ring + 1)] + [(y, right + ring) for y in range(top - ring, bottom + ring + 1)]
            if any(dark[y][x] for y, x in cells):
                break
            quiet = ring
        return {"size": size, "quietZone": quiet}
    return {"size": None}


def png(modules):
    raw = b"".join(b"\x00" + b"".join(bytes(colour) * SCALE for colour in row) for row in modules for _ in range(SCALE))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", len(modules[0]) * SCALE, len(modules) * SCALE, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def main():
    arguments = sys.argv[1:]
    if len(arguments) != 3 or arguments[0] != "--background" or arguments[1] not in THEMES:
        sys.exit("usage: halfblock_png.py --background dark|light OUTPUT.png < SCREEN")
    theme = THEMES[arguments[1]]
    screen = sys.stdin.buffer.read().decode("utf-8")
    grid = modules(cells(screen.rstrip("\n"), theme), theme)
    with open(arguments[2], "wb") as output:
        output.write(png(grid))
    print(json.dumps(quiet_zone(grid)))


if __name__ == "__main__":
    main()
