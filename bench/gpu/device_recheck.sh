#!/usr/bin/env bash
# A device call after a kernel change, when the kit has run before (bench/results/README.md, "GPU:
# the device kit"): in about 6 minutes and 7 files in OUTDIR, with the kit of the changed tree
# (bench/gpu/prepare_kit.sh; carry build-kit without test_gpu_emulator):
#   tests.log   gpu_device on the device, then compute-sanitizer memcheck and racecheck on its
#               dropout and training cases (the end of each)
#   map.txt, ncu.txt, tiles.txt   bench/gpu/device_profile.sh's bench map, Nsight Compute tables
#               and the per-step tiles over cells and shapes (comparable with earlier calls' tiles.txt)
#   bench.csv, bench.md, bench.log   bench/gpu/bench_vs_cudnn.py on the goals, FlashRNN's point, the
#               stacks and DeepBench, f32 and f16 (what its budget reaches)
# usage: bench/gpu/device_recheck.sh [--kit DIR] OUTDIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kit="$root/build-kit"
if [ "${1:-}" = "--kit" ]; then kit=$(cd "$2" && pwd); shift 2; fi
if [ $# -ne 1 ]; then echo "usage: bench/gpu/device_recheck.sh [--kit DIR] OUTDIR" >&2; exit 2; fi
mkdir -p "$1" && out=$(cd "$1" && pwd)
export PATH="$PATH:/usr/local/cuda/bin" PYTHONUNBUFFERED=1
start=$(date +%s)
cases="--test-case=GPU forward: dropout wrappers*,GPU training*"
{
  cat "$kit/MANIFEST.txt"
  echo "== gpu_device"
  timeout 90 "$kit/test_gpu_device" 2>&1 | tail -n 30
  echo "exit ${PIPESTATUS[0]}"
  for tool in memcheck racecheck; do
    echo "== compute-sanitizer $tool"
    timeout 60 compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 "$kit/test_gpu_device" "$cases" 2>&1 | tail -n 12
    echo "exit ${PIPESTATUS[0]}"
  done
} >"$out/tests.log" 2>&1
echo "device_recheck: tests.log ($(($(date +%s) - start)) s): $(grep -c '^exit 0' "$out/tests.log") of 3 parts exit 0"
RNNCORE_PROFILE_PARTS=map,ncu,tiles RNNCORE_PROFILE_BUDGET_S=${RNNCORE_RECHECK_PROFILE_S:-170} \
  bash "$root/bench/gpu/device_profile.sh" --kit "$kit" "$out"
timeout "${RNNCORE_RECHECK_BENCH_S:-170}" python3 "$root/bench/gpu/bench_vs_cudnn.py" --rnncore "$kit/rnncore" \
  --speed-model "$kit/speed_model" --out "$out" --suites goals,flashrnn,stack,deepbench --dtypes f32,f16 \
  --budget-s $((${RNNCORE_RECHECK_BENCH_S:-170} - 30)) --case-timeout 30 >"$out/bench.log" 2>&1
echo "device_recheck: bench exit $? ($(($(date +%s) - start)) s)"
tail -n 2 "$out/bench.log"
