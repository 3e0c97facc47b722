#!/usr/bin/env python3
"""Guest instructions of one inference per function: the block files the count plugin writes
(bench/qemu_insncount.c, blocks=FILE) for the images of one and of two inferences, summed per
function of the ELF (arm-none-eabi-nm) and subtracted, as count.sh subtracts the totals. A block is
counted in the function its first instruction is in (a block never crosses a function's end:
GCC's functions end in a branch or return). Prints the largest as Markdown rows.

  functions.py MODEL BUILD IMAGE_R1.elf BLOCKS_R1 BLOCKS_R2 [TOP]
"""
import bisect
import collections
import subprocess
import sys


def symbols(elf):
    out = subprocess.run(["arm-none-eabi-nm", "--demangle", "--defined-only", elf], check=True,
                         capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16) & ~1, parts[2]))  # the Thumb bit off
    syms.sort()
    return syms


def per_function(syms, blocks):
    addrs = [a for a, _ in syms]
    total = collections.Counter()
    with open(blocks) as f:
        for line in f:
            addr, n = line.split()
            i = bisect.bisect_right(addrs, int(addr, 16)) - 1
            total[syms[i][1] if i >= 0 else "?"] += int(n)
    return total


def short(name):
    """The function's name without its namespaces and parameters."""
    name = name.replace("(anonymous namespace)::", "").split("(")[0]
    for prefix in ("void ", "int "):
        name = name[len(prefix):] if name.startswith(prefix) else name
    return name.replace("rnncore::q8::", "")


def main():
    model, build, elf, one, two = sys.argv[1:6]
    top = int(sys.argv[6]) if len(sys.argv) > 6 else 6
    syms = symbols(elf)  # the images differ only in a volatile count: the same addresses
    a, b = per_function(syms, one), per_function(syms, two)
    diff = {k: b[k] - a[k] for k in set(a) | set(b) if b[k] != a[k]}
    total = sum(diff.values())
    rows = sorted(diff.items(), key=lambda kv: -kv[1])
    rest = sum(v for _, v in rows[top:])
    for name, n in rows[:top]:
        print(f"| {model} | {build} | `{short(name)}` | {n} | {100.0 * n / total:.1f} % |")
    print(f"| {model} | {build} | the rest | {rest} | {100.0 * rest / total:.1f} % |")


if __name__ == "__main__":
    main()
