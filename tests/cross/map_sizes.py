#!/usr/bin/env python3
"""Bytes each part of a firmware image takes, from the GNU ld map file of its link.

    python3 tests/cross/map_sizes.py build/examples/firmware/firmware_lstm.map
    python3 tests/cross/map_sizes.py --absent 'REGEX' MAP


Prints one row per part (rnncore, the C and math libraries, libgcc, the application's code and
variables, its constants such as the model's weights, and the stack the linker script reserves)
with text (code and constants: flash), data (initialised variables: flash and RAM) and bss
(zeroed variables: RAM), in the meaning of binutils' `size`. Sections count where the linker put
them, so the rows add up to `size` of the image, up to alignment padding.

With --absent, also fails (status 1) when a section the image keeps comes from an object whose
path matches REGEX (e.g. the integer core in a float-only image), and names those objects.
"""
import re
import sys
from collections import defaultdict

# An output section line: ".text  0x00000000  0x20858" at column 0.
OUTPUT = re.compile(r"^(\.\S+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)")
# An input section: " .text.foo  0xADDR  0xSIZE  file" (the name may sit alone on the line before).
INPUT = re.compile(r"^ (\.\S+)?\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S.*)$")
KIND = {".text": "text", ".ARM.exidx": "text", ".init_array": "text", ".data": "data", ".bss": "bss"}


def part_of(path, name):
    """Which row an input section belongs to."""
    m = re.search(r"lib([A-Za-z0-9_+-]+)\.a\(", path)
    if m:
        return "lib" + m.group(1) + ".a"
    if name.startswith(".rodata"):
        return "application constants (model weights, sample)"
    return "application code and variables"


def main():
    args = sys.argv[1:]
    absent = None
    if len(args) == 3 and args[0] == "--absent":
        absent, args = re.compile(args[1]), args[2:]
    if len(args) != 1:
        sys.exit(__doc__)
    kept = set()  # objects with a section in the image
    totals = defaultdict(lambda: {"text": 0, "data": 0, "bss": 0})
    kind = None
    pending_name = None
    in_map = False
    with open(args[0]) as f:
        lines = f.read().splitlines()
    for line in lines:
        if line.startswith("Linker script and memory map"):
            in_map = True
            continue
        if not in_map:
            continue
        m = OUTPUT.match(line)
        if m:
            kind = KIND.get(m.group(1))
            pending_name = None
            if m.group(1) == ".stack":  # reserved by the script itself: no input sections
                totals["stack (linker script)"]["bss"] += int(m.group(2), 16)
            continue
        if kind is None:
            continue
        if re.match(r"^ \.\S+$", line):  # long input-section name alone; address, size, file follow
            pending_name = line.strip()
            continue
        m = INPUT.match(line)
        if not m:
            continue
        name = m.group(1) or pending_name or ""
        pending_name = None
        size = int(m.group(2), 16)
        path = m.group(3).strip()
        if size == 0 or path.startswith("load address"):
            continue
        totals[part_of(path, name)][kind] += size
        kept.add(path)
    order = sorted(totals, key=lambda p: (not p.startswith("lib"), p))
    print(f"{'part':<48} {'text':>8} {'data':>8} {'bss':>8}")
    sums = {"text": 0, "data": 0, "bss": 0}
    for p in order:
        t = totals[p]
        print(f"{p:<48} {t['text']:>8} {t['data']:>8} {t['bss']:>8}")
        for k in sums:
            sums[k] += t[k]
    print(f"{'total':<48} {sums['text']:>8} {sums['data']:>8} {sums['bss']:>8}")
    if absent is not None:
        found = sorted(p for p in kept if absent.search(p))
        if found:
            print(f"{args[0]}: the image keeps sections of " + ", ".join(found))
            sys.exit(1)
        print(f"{args[0]}: no section of an object matching {absent.pattern}")


if __name__ == "__main__":
    main()
