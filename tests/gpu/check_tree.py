#!/usr/bin/env python3
"""The GPU tree's include rules (docs/gpu.md, "The kernels"), checked on the sources:

- src/gpu/device/ includes only src/gpu/vendor.hpp, src/gpu/device/, include/rnncore/philox.h and
  src/shared/ (the definitions host and device code share: half.hpp, cell_grad.hpp), never
  src/internal/ or src/gpu/host/;
- src/gpu/vendor.hpp includes nothing of the project;
- no include graph cycle among the project headers reachable from src/gpu/;
- only src/gpu/vendor.hpp tests for a GPU compiler (__CUDACC__, __HIPCC__, ...) among the GPU files;
- nothing refers to the old places (hip/, src/internal/gpu_plan.hpp).

Exits 1 naming each violation; prints one line per rule checked otherwise.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
COMPILER_MACROS = re.compile(r'\b(__CUDACC__|__HIPCC__|__HIP__|__CUDA_ARCH__|__HIP_DEVICE_COMPILE__|__NVCC__|__HIP_PLATFORM_AMD__)\b')
DEVICE_MAY_INCLUDE = {"src/gpu/vendor.hpp", "rnncore/philox.h"}  # and src/shared/: the host/device definitions
GPU_FILES_DIRS = ["src/gpu", "tests/gpu", "bench/gpu"]


def project_path(inc):
    """The repository path of a quoted include (the build's include directories: root, include/)."""
    for cand in (inc, os.path.join("include", inc)):
        if os.path.isfile(os.path.join(ROOT, cand)):
            return cand
    return None


def includes(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def gpu_files():
    for d in GPU_FILES_DIRS:
        for base, _, names in os.walk(os.path.join(ROOT, d)):
            for n in sorted(names):
                if n.endswith((".hpp", ".cpp", ".hip", ".cu", ".h")):
                    yield os.path.relpath(os.path.join(base, n), ROOT)


def main():
    errors = []
    files = sorted(gpu_files())
    device = [f for f in files if f.startswith("src/gpu/device/")]
    if not device or "src/gpu/vendor.hpp" not in files:
        errors.append("src/gpu/device/ or src/gpu/vendor.hpp is missing")
    for f in device:
        for inc in includes(f):
            if not (inc in DEVICE_MAY_INCLUDE or inc.startswith("src/gpu/device/") or inc.startswith("src/shared/")):
                errors.append(f"{f}: device code includes {inc} (allowed: src/gpu/device/, src/shared/, {', '.join(sorted(DEVICE_MAY_INCLUDE))})")
    for inc in includes("src/gpu/vendor.hpp") if "src/gpu/vendor.hpp" in files else []:
        if project_path(inc):
            errors.append(f"src/gpu/vendor.hpp includes the project's {inc}")
    print(f"check_tree: {len(device)} device headers include only the vendor header, each other and the shared math")

    # Cycles: depth-first over the project headers reachable from the GPU files.
    graph, stack, state = {}, [], {}

    def visit(node):
        state[node] = 1
        stack.append(node)
        for inc in includes(node):
            p = project_path(inc)
            if p is None:
                continue
            graph.setdefault(node, []).append(p)
            if state.get(p) == 1:
                errors.append("include cycle: " + " -> ".join(stack[stack.index(p):] + [p]))
            elif p not in state:
                visit(p)
        stack.pop()
        state[node] = 2

    for f in files:
        if f not in state:
            visit(f)
    print(f"check_tree: no include cycle among {len(state)} headers and sources reachable from the GPU files")

    for f in files:
        if f == "src/gpu/vendor.hpp":
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.lstrip().startswith("#") and COMPILER_MACROS.search(line):
                    errors.append(f"{f}:{n}: tests for a GPU compiler outside src/gpu/vendor.hpp: {line.strip()}")
                if re.search(r'#\s*include\s+"hip/|src/internal/gpu_plan\.hpp', line):
                    errors.append(f"{f}:{n}: refers to the old GPU places: {line.strip()}")
    print(f"check_tree: only src/gpu/vendor.hpp tests for a GPU compiler among {len(files)} GPU files")
    if os.path.isdir(os.path.join(ROOT, "hip")) and os.listdir(os.path.join(ROOT, "hip")):
        errors.append("hip/ exists again: GPU code belongs in src/gpu/")

    for e in errors:
        print("check_tree: FAILED: " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
