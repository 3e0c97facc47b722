#!/usr/bin/env bash
# Builds the device kit on a CPU machine with nvcc (bench/results/README.md, "GPU: the device kit"):
# a release build with -Dgpu=cuda for sm_80 and sm_90 (the CUDA runtime linked statically, so the
# binaries need only the C and C++ runtimes and the NVIDIA driver there), then KITDIR (default build-kit/, one
# ignored folder the device tool can carry) with what bench/gpu/device_run.sh runs on the device:
#   test_gpu_device, rnncore, speed_model, MANIFEST.txt (commit, toolkit, targets, sizes,
#   checksums, each binary's libraries), wheels/ (FlashRNN's, for bench/gpu/flashrnn_compare.py);
# and KITDIR-dry/test_gpu_emulator, the dry run's stand-in for the device (beside the kit, not in
# it: with it the kit and the working tree reached the device tool's 64 MiB).
# It fails when a binary needs a library outside the C runtime, lacks sm_80 or sm_90 code, or the
# kit and the repository's tracked files reach 60 MiB.
#
# nvcc compiles every kernel instance twice (sm_80, sm_90): on 2 busy cores that is the long part.
# An existing build is reused: --from DIR takes a configured -Dgpu=cuda build directory (CI's), and
# the default build-cuda/ is configured once and only recompiled where sources changed.
#
# usage: bench/gpu/prepare_kit.sh [--from BUILDDIR] [KITDIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=build-cuda
if [ "${1:-}" = "--from" ]; then build=$2; shift 2; fi
kit=${1:-build-kit}
export PATH="$PATH:/usr/local/cuda/bin"
die() { echo "prepare_kit: $*" >&2; exit 1; }

command -v nvcc >/dev/null || die "nvcc not found (PATH, /usr/local/cuda/bin)"
if [ ! -f "$build/build.ninja" ]; then
  # (libstdc++ stays shared: linked statically, GCC 12's would need glibc 2.36 for arc4random and
  # _dl_find_object; shared, the binaries need glibc 2.34 and GLIBCXX_3.4.29, Ubuntu 22.04 or newer)
  meson setup "$build" -Dgpu=cuda -Dgpu_cuda_archs=sm_80,sm_90 -Dgpu_resource_usage=true
fi
opts=$(meson introspect --buildoptions "$build")
python3 - "$opts" <<'EOF' || die "$build is not a -Dgpu=cuda release build for sm_80 and sm_90"
import json, sys
o = {x["name"]: x["value"] for x in json.loads(sys.argv[1])}
ok = o["gpu"] == "cuda" and {"sm_80", "sm_90"} <= set(o["gpu_cuda_archs"]) and o["buildtype"] == "release"
sys.exit(0 if ok else 1)
EOF

targets=(tests/test_gpu_device tests/test_gpu_emulator tools/rnncore bench/speed_model)
echo "prepare_kit: compiling ${targets[*]} in $build (nvcc: long on a busy machine)"
nice -n 10 meson compile -C "$build" "${targets[@]}" >"$build/kit-compile.log" 2>&1 ||
  { tail -n 40 "$build/kit-compile.log"; die "compile failed (log: $build/kit-compile.log)"; }

rm -rf "$kit" "$kit-dry"
mkdir -p "$kit" "$kit-dry"
for t in tests/test_gpu_device tools/rnncore bench/speed_model; do cp "$build/$t" "$kit/"; done
cp "$build/tests/test_gpu_emulator" "$kit-dry/"
# FlashRNN for bench/gpu/flashrnn_compare.py (bench/gpu/flashrnn_requirements.txt: the device has
# no network). Without a network here the kit still works: that comparison then says the wheels are missing.
mkdir -p "$kit/wheels"
python3 -m pip download -q --no-deps --only-binary :all: -d "$kit/wheels" -r bench/gpu/flashrnn_requirements.txt ||
  echo "prepare_kit: warning: FlashRNN's wheels not downloaded (no network?): flashrnn_compare.py will not run on the device"

manifest="$kit/MANIFEST.txt"
{
  echo "rnncore device kit, prepared $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD -- . ':!build*' || echo ' (with uncommitted changes)')"
  echo "build: $build, $(nvcc --version | tail -n 1)"
  echo "targets of test_gpu_device: $(python3 - "$kit/test_gpu_device" <<'EOF'
# The cubins' targets from the embedded fatbinaries' entry headers (no cuobjdump needed; nvcc 13
# compresses large fatbins, so their arch names are not visible as strings): a fatbin is the magic
# 0xBA55ED50, version 1, header size 16, payload size; each entry: kind (1 PTX, 2 ELF), header
# size, padded payload size, and the SM version at byte 28.
import struct, sys
data, archs, pos = open(sys.argv[1], "rb").read(), set(), 0
while (i := data.find(b"\x50\xed\x55\xba", pos)) >= 0:
    pos = i + 4
    version, header = struct.unpack_from("<HH", data, i + 4)
    if version != 1 or header != 16:
        continue
    p, end = i + 16, i + 16 + struct.unpack_from("<Q", data, i + 8)[0]
    while p + 32 <= min(end, len(data)):
        kind, _, size = struct.unpack_from("<HHI", data, p)
        sm = struct.unpack_from("<I", data, p + 28)[0]
        if kind in (1, 2) and 10 <= sm < 200:
            archs.add(("compute_" if kind == 1 else "sm_") + str(sm))
        if size == 0:
            break
        p += size + struct.unpack_from("<Q", data, p + 8)[0]
print(" ".join(sorted(archs)))
EOF
)"
} >"$manifest"
grep -q "targets of test_gpu_device:.*sm_80 .*sm_90" "$manifest" || die "test_gpu_device lacks sm_80 or sm_90 code: $(cat "$manifest")"

# Libraries: the device has no Debian packages, only the C runtime and the driver.
allowed='^(linux-vdso|libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.'
bad=""
for b in "$kit"/test_gpu_device "$kit-dry"/test_gpu_emulator "$kit"/rnncore "$kit"/speed_model; do
  libs=$(ldd "$b" | awk '{print $1}' | sed 's|.*/||')
  glibc=$(objdump -T "$b" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
  glibcxx=$(objdump -T "$b" | grep -o 'GLIBCXX_[0-9.]*' | sort -uV | tail -n 1)
  echo "$(basename "$b"): $(du -k "$b" | cut -f1) KiB, needs $(echo $libs | tr '\n' ' ')(newest symbols $glibc ${glibcxx:-}), sha256 $(sha256sum "$b" | cut -c1-16)" >>"$manifest"
  for l in $libs; do
    if ! echo "$l" | grep -qE "$allowed"; then bad="$bad $(basename "$b"):$l"; fi
  done
done
[ -z "$bad" ] || die "the kit needs libraries the device lacks:$bad"

# What travels to the device: the kit and the tracked files (the device tool's limit is 64 MiB).
size=$(du -sk "$kit" | cut -f1)
tree=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print int(s / 1024)}')
echo "total: $size KiB (the repository's tracked files: $tree KiB more)" >>"$manifest"
[ $((size + tree)) -lt $((60 * 1024)) ] || die "the kit ($size KiB) and the tracked files ($tree KiB) reach 60 MiB"
cat "$manifest"
echo "prepare_kit: ready in $kit; on the device: bash bench/gpu/device_run.sh \$OUT (carry $kit)"
