#!/usr/bin/env bash
# CI stage: the GPU backend compiles for both vendors on a machine without a GPU.
#   - hipcc (Debian's ROCm 5.2) for AMD: gfx90a (CDNA, wave64) and gfx1030 (RDNA, wave32), so
#     both wavefront sizes are compiled (the library and the device test only); the device test
#     must skip cleanly; this build runs in the background beside the NVIDIA one;
#   - nvcc (from the machine image, /usr/local/cuda) for NVIDIA sm_80 and sm_90: the library, the
#     device kit's programs and the tests that differ with the GPU backend built in (the GPU device
#     test skips saying why; the API and support-matrix tests pass); the kit's dry run runs the
#     kernel emulator's cases on the host (the release stage runs all of them);
#   - the device kit (bench/gpu/prepare_kit.sh) from the CUDA build, and bench/gpu/device_run.sh's
#     dry run with the emulator in place of the device;
#   - include/rnncore/philox.h in device code with both compilers (tests/philox_device_check.cu);
#   - the resource gate: both builds print the compilers' per-kernel resource usage
#     (-Dgpu_resource_usage=true), and scripts/gpu_resource_report.py --check fails a target where a
#     kernel instance has spills / local memory (NVIDIA) or scratch (AMD) beyond
#     scripts/gpu_resource_allowances.txt, or where an allowance there has gone stale; and fails
#     when docs/gpu_resources.md lists other kernel instances than the builds made (--doc).
# Counts one result per compile, per test and per gate target; ends with "STAGE_RESULT passed=N failed=M".
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "stage_gpu_build: ok: $*"; }
bad() { failed=$((failed + 1)); echo "stage_gpu_build: FAILED: $*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
echo "=== installing hipcc (ROCm 5.2 from Debian) and the build dependencies"
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends \
         hipcc libamdhip64-dev rocm-device-libs g++ meson ninja-build pkg-config libxsimd-dev doctest-dev nlohmann-json3-dev libcli11-dev >/dev/null; }; then
  bad "apt-get install hipcc libamdhip64-dev rocm-device-libs"
fi

work=$(mktemp -d /tmp/rnncore-gpu-ci.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The compilers' resource reports, from the builds below (no extra compile): nvcc.log, hipcc.log.
mkdir -p "$work/usage"

# Adds the results of a meson build directory's last test run.
count_tests() {
  local json="$1/meson-logs/testlog.json" good nogood
  if [ ! -f "$json" ]; then bad "$2: no test log"; return; fi
  good=$(grep -c '"result": "\(OK\|SKIP\|EXPECTEDFAIL\)"' "$json" || true)
  nogood=$(grep -c '"result": "\(FAIL\|TIMEOUT\|ERROR\|UNEXPECTEDPASS\)"' "$json" || true)
  passed=$((passed + good))
  failed=$((failed + nogood))
  echo "stage_gpu_build: $2: $good passed or skipped, $nogood failed"
}

# The AMD build runs in the background beside the NVIDIA one (hipcc compiles its two targets one
# after the other on one core; nvcc takes the other): its output is printed after the NVIDIA part.
hip_build() {
  echo "=== AMD: -Dgpu=hip for gfx90a and gfx1030"
  if command -v hipcc >/dev/null; then
    # Only the library and the device test: the host code is the release stage's (a whole second
    # host build took 7 minutes).
    if meson setup "$work/hip" -Dgpu=hip -Dgpu_hip_archs=gfx90a,gfx1030 -Dgpu_resource_usage=true >"$work/hip-setup.log" 2>&1 &&
       meson compile -C "$work/hip" tests/test_gpu_device >"$work/usage/hipcc.log" 2>&1; then
      grep -v 'remark:\|^__global__\|^\^$\|^In file included from' "$work/usage/hipcc.log"
      echo "RESULT ok hipcc build (gfx90a, gfx1030)"
      # The device test links the HIP runtime; with no AMD GPU here it must skip (exit 77).
      meson test -C "$work/hip" --print-errorlogs --no-rebuild gpu_device
      echo "RESULT tests"
      grep -h "SKIP" "$work/hip/meson-logs/testlog.txt" | head -n 2
    else
      cat "$work/hip-setup.log"
      grep -v 'remark:\|^__global__\|^\^$\|^In file included from' "$work/usage/hipcc.log"
      echo "RESULT bad hipcc build"
    fi
    # (nvcc includes its runtime header implicitly; hipcc needs it named)
    if hipcc -std=c++17 --offload-arch=gfx90a -Iinclude -include hip/hip_runtime.h -x hip -c tests/philox_device_check.cu \
         -o "$work/philox_hip.o"; then
      echo "RESULT ok philox.h in HIP device code"
    else
      echo "RESULT bad philox.h in HIP device code"
    fi
  else
    echo "RESULT bad hipcc not found after installing it"
  fi
}
hip_build >"$work/hip.out" 2>&1 &
hip_pid=$!

echo "=== NVIDIA: -Dgpu=cuda for sm_80 and sm_90"
export PATH="$PATH:/usr/local/cuda/bin"
if command -v nvcc >/dev/null; then
  nvcc --version | tail -n 2
  # The library (every kernel instance: the resource reports), what the device kit ships, and the
  # tests that differ with the GPU backend built in. The rest of the host tree is the release
  # stage's (the same g++ code): building and running it again here took about 10 minutes, and the
  # kit's dry run below runs the emulator's cases.
  cuda_targets=(tests/test_gpu_device tests/test_gpu_emulator tools/rnncore bench/speed_model tests/test_api
                tests/test_support_matrix)
  if meson setup "$work/cuda" -Dgpu=cuda -Dgpu_cuda_archs=sm_80,sm_90 -Dgpu_resource_usage=true >"$work/cuda-setup.log" 2>&1 &&
     meson compile -C "$work/cuda" "${cuda_targets[@]}" >"$work/usage/nvcc.log" 2>&1; then
    grep -v 'ptxas info\|bytes stack frame' "$work/usage/nvcc.log"
    ok "nvcc build (sm_80, sm_90)"
    (cd "$root" && meson test -C "$work/cuda" --print-errorlogs --no-rebuild gpu_device api support_matrix gpu_speed_model)
    count_tests "$work/cuda" "cuda build: the GPU backend's tests"
    grep -h "SKIP" "$work/cuda/meson-logs/testlog.txt" | head -n 2
    # The device kit from this build, and its one command's dry run (the emulator in place of the
    # device, no timing; bench/results/README.md): so the kit cannot rot between device sessions.
    kit_start=$(date +%s)
    if bash bench/gpu/prepare_kit.sh --from "$work/cuda" "$work/kit" >"$work/kit.log" 2>&1 &&
       bash bench/gpu/device_run.sh --dry-run --kit "$work/kit" "$work/kit-out" >>"$work/kit.log" 2>&1; then
      ok "device kit: prepare_kit.sh and device_run.sh --dry-run"
    else
      tail -n 30 "$work/kit.log"
      bad "device kit: prepare_kit.sh or device_run.sh --dry-run"
    fi
    cat "$work/kit-out/summary.md" 2>/dev/null | head -n 20
    echo "stage_gpu_build: device kit dry run took $(($(date +%s) - kit_start)) s"
  else
    cat "$work/cuda-setup.log"
    grep -v 'ptxas info\|bytes stack frame' "$work/usage/nvcc.log"
    bad "nvcc build"
  fi
  if nvcc -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -Iinclude \
       -c tests/philox_device_check.cu -o "$work/philox_cuda.o"; then
    ok "philox.h in CUDA device code"
  else
    bad "philox.h in CUDA device code"
  fi
else
  bad "nvcc not found (the CUDA toolkit comes with the CI machine image: /usr/local/cuda/bin/nvcc is missing)"
fi

wait "$hip_pid"
# The AMD build's output, and its results.
while IFS= read -r line; do
  case "$line" in
    "RESULT ok "*) ok "${line#RESULT ok }" ;;
    "RESULT bad "*) bad "${line#RESULT bad }" ;;
    "RESULT tests") count_tests "$work/hip" "hip build: gpu_device" ;;
    *) echo "$line" ;;
  esac
done <"$work/hip.out"

echo "=== resource gate: spills / scratch per kernel instance against scripts/gpu_resource_allowances.txt"
gate_start=$(date +%s)
python3 scripts/gpu_resource_report.py --logs "$work/usage" --check scripts/gpu_resource_allowances.txt \
  --doc docs/gpu_resources.md >"$work/gate.txt" 2>&1
cat "$work/gate.txt"
for target in sm_80 sm_90 gfx90a gfx1030; do
  if grep -q "^CHECK $target ok" "$work/gate.txt"; then
    ok "resource gate $target"
  else
    bad "resource gate $target (kernels above, or no report)"
  fi
done
if grep -q "^CHECK doc ok" "$work/gate.txt"; then
  ok "docs/gpu_resources.md lists every kernel instance"
else
  bad "docs/gpu_resources.md is stale (CHECK doc above)"
fi
echo "stage_gpu_build: resource gate took $(($(date +%s) - gate_start)) s (the reports come from the builds)"

echo "stage_gpu_build: wall time $(($(date +%s) - start)) s"
echo "STAGE_RESULT passed=$passed failed=$failed"
