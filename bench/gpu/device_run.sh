#!/usr/bin/env bash
# The first-contact run on an NVIDIA GPU, in one command (bench/results/README.md, "GPU: the device
# kit"): the kit that bench/gpu/prepare_kit.sh built on a CPU machine (build-kit/: release binaries
# for sm_80 and sm_90) is run against the device in time-boxed parts, and everything lands in OUTDIR
# (7 files):
#   env.txt          the device, driver, toolkit, PyTorch, the kit's manifest and its libraries
#   tests.log        gpu_device: the public API on the device against the reference, every kernel
#                    choice, the same seeded cases the emulator test checks on the host
#   sanitizer.log    compute-sanitizer memcheck and racecheck on two of those test cases (or why
#                    the runtime refused them)
#   speed_model.md   the speed model's tables (forward and backward) (H200, H100, A100)
#   bench.csv        bench/gpu/bench_vs_cudnn.py: raw rows (cuDNN and rnncore times, the bound)
#   bench.md         its tables and the goals
#   summary.md       one line per part: passed / failed / refused / timed out, and its seconds
# The whole run ends inside 8 minutes (RNNCORE_KIT_BUDGET_S, default 470 s): each part gets at
# most its own limit and never more than what is left.
#
# --dry-run (CI, no GPU): the same parts with the emulator in place of the device: gpu_device must
# skip (exit 77), the emulator runs the seeded random cases instead, the sanitizer part says why it
# cannot run, and the benchmark checks its command lines and bounds without timing. It fails when a
# part breaks, so the kit cannot rot.
#
# usage: bench/gpu/device_run.sh [--dry-run] [--kit DIR] OUTDIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dry=0
kit="$root/build-kit"
while [ $# -gt 1 ]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    --kit) kit=$(cd "$2" && pwd); shift 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: bench/gpu/device_run.sh [--dry-run] [--kit DIR] OUTDIR" >&2
  exit 2
fi
mkdir -p "$1" && out=$(cd "$1" && pwd)
# (the dry run's emulator lies beside the kit, in KITDIR-dry: prepare_kit.sh)
for f in test_gpu_device rnncore speed_model MANIFEST.txt $( ((dry)) && echo ../$(basename "$kit")-dry/test_gpu_emulator); do
  if [ ! -e "$kit/$f" ]; then
    echo "device_run: $kit/$f is missing: run bench/gpu/prepare_kit.sh first (and carry build-kit)" >&2
    exit 2
  fi
done
export PATH="$PATH:/usr/local/cuda/bin"
export PYTHONUNBUFFERED=1
start=$(date +%s)
deadline=$((start + ${RNNCORE_KIT_BUDGET_S:-470}))
summary="$out/summary.md"
failed=0
{
  echo "# rnncore device kit: $( ((dry)) && echo "dry run (emulator, no timing)" || echo "device run")"
  echo
  echo "Started $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -n); kit $kit; budget $((deadline - start)) s."
  echo
  echo "| part | result | seconds |"
  echo "| --- | --- | ---: |"
} >"$summary"

# part NAME RESULT SECONDS [failed]: one row of the summary.
part() {
  echo "| $1 | $2 | $3 |" >>"$summary"
  echo "device_run: $1: $2 ($3 s)"
  if [ "${4:-}" = failed ]; then failed=$((failed + 1)); fi
}

# limit SECONDS: the part's own limit, or what is left of the budget if that is less (at least 5).
limit() {
  local left=$((deadline - $(date +%s)))
  if [ "$left" -lt "$1" ]; then echo $((left > 5 ? left : 5)); else echo "$1"; fi
}

# timed LIMIT LOG CMD...: runs CMD with a time box, appending to LOG; sets rc and secs.
timed() {
  local lim=$1 log=$2 t0
  shift 2
  t0=$(date +%s)
  echo "\$ $*" >>"$log"
  timeout --kill-after=5 "$lim" "$@" >>"$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - t0))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "(timed out after $lim s)" >>"$log"; fi
}

# ---------------------------------------------------------------------------------------- env
env_log="$out/env.txt"
{
  echo "== kit"; cat "$kit/MANIFEST.txt"
  echo "== nvidia-smi"; timeout 20 nvidia-smi 2>&1 || echo "(no nvidia-smi)"
  echo "== nvcc"; timeout 20 nvcc --version 2>&1 || echo "(no nvcc)"
  echo "== compute-sanitizer"; timeout 20 compute-sanitizer --version 2>&1 || echo "(no compute-sanitizer)"
  echo "== python3"; timeout 60 python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'gpu', torch.cuda.is_available() and torch.cuda.get_device_name(0))" 2>&1 || echo "(no PyTorch)"
  echo "== the kit's libraries"
  for b in test_gpu_device rnncore speed_model; do echo "-- $b"; ldd "$kit/$b" 2>&1; done
  echo "== rnncore info"; timeout 60 "$kit/rnncore" info 2>&1
} >"$env_log" 2>&1
if grep -q "=> not found" "$env_log"; then
  part env "a library of the kit is missing (env.txt)" $(($(date +%s) - start)) failed
else
  part env "recorded (env.txt)" $(($(date +%s) - start))
fi

# ---------------------------------------------------------------------------------- the tests
tests_log="$out/tests.log"
: >"$tests_log"
timed "$(limit 140)" "$tests_log" "$kit/test_gpu_device"
if ((dry)); then
  # No device: gpu_device skips; the emulator runs the same seeded random cases on the host.
  if [ $rc -eq 77 ]; then part gpu_device "skipped, as it must without a device" $secs
  else part gpu_device "exit $rc where a skip (77) was expected" $secs failed; fi
  timed "$(limit 120)" "$tests_log" "$kit-dry/test_gpu_emulator" "--test-case=emulated GPU forward matches the reference*"
  if [ $rc -eq 0 ]; then part "gpu_emulator (in place of the device)" passed $secs
  else part "gpu_emulator (in place of the device)" "exit $rc" $secs failed; fi
else
  case $rc in
    0) part gpu_device passed $secs ;;
    77) part gpu_device "skipped: no usable device (tests.log)" $secs failed ;;
    124|137) part gpu_device "timed out (tests.log)" $secs failed ;;
    *) part gpu_device "FAILED, exit $rc (tests.log)" $secs failed ;;
  esac
fi

# ------------------------------------------------------------------------------ the sanitizers
san_log="$out/sanitizer.log"
: >"$san_log"
san_cases="--test-case=GPU forward: dropout wrappers*,GPU training*"
if ! command -v compute-sanitizer >/dev/null; then
  echo "compute-sanitizer is not on PATH (nor in /usr/local/cuda/bin)" >>"$san_log"
  part compute-sanitizer "not run: compute-sanitizer not found" 0 $( ((dry)) || echo failed)
else
  for tool in memcheck racecheck; do
    one="$out/sanitizer-$tool.tmp"
    : >"$one"
    timed "$(limit 60)" "$one" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$kit/test_gpu_device" "$san_cases"
    { echo "=== $tool"; cat "$one"; } >>"$san_log"
    refused=0
    if grep -q "Device not supported\|not supported on this\|Unable to find\|error 999" "$one"; then refused=1; fi
    rm -f "$one"
    if ((refused)) && [ $rc -ne 99 ]; then  # (it may still run the program, uninstrumented)
      part "$tool" "refused by the runtime (sanitizer.log)" $secs
    elif [ $rc -eq 77 ]; then
      part "$tool" "not run: no device$( ((dry)) && echo ' (dry run)')" $secs $( ((dry)) || echo failed)
    elif [ $rc -eq 0 ]; then
      part "$tool" "clean" $secs
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      part "$tool" "timed out; what it found is in sanitizer.log" $secs
    else
      part "$tool" "FAILED, exit $rc (sanitizer.log)" $secs failed
    fi
  done
fi

# ------------------------------------------------------------------------------ the speed model
model_md="$out/speed_model.md"
t0=$(date +%s)
{ "$kit/speed_model" --profile H200 --profile sm_90 --profile sm_80 && echo &&
  echo "# Backward" && echo && "$kit/speed_model" --backward --profile H200 --profile sm_90 && echo &&
  echo "# Backward, RNNCORE_GPU_RECURRENCE=persistent" && echo && "$kit/speed_model" --backward-persistent --profile H200; } >"$model_md" 2>&1
rc=$?
if [ $rc -eq 0 ]; then part speed_model "tables written (speed_model.md)" $(($(date +%s) - t0))
else part speed_model "exit $rc (speed_model.md)" $(($(date +%s) - t0)) failed; fi

# ---------------------------------------------------------------------------------- the bench
bench_log="$out/bench.md"
lim=$(limit 250)
args=(--rnncore "$kit/rnncore" --speed-model "$kit/speed_model" --out "$out" --budget-s $((lim - 50)) --case-timeout 30)
if ((dry)); then args+=(--dry-run); fi
timed "$lim" "$out/bench.log" python3 "$root/bench/gpu/bench_vs_cudnn.py" "${args[@]}"
tail -n 3 "$out/bench.log"
rows=$(($(wc -l <"$out/bench.csv" 2>/dev/null || echo 1) - 1))
if [ $rc -eq 0 ]; then part bench_vs_cudnn "$rows rows (bench.csv, bench.md)" $secs
else part bench_vs_cudnn "exit $rc after $rows rows (the end of its log below)" $secs failed; fi
if [ ! -s "$bench_log" ]; then echo "(bench.md was not written)" >"$bench_log"; fi
{ echo; echo "## The benchmark's log (last 40 lines)"; echo; echo '```'; tail -n 40 "$out/bench.log"; echo '```'; } >>"$summary"
rm -f "$out/bench.log"

{ echo; echo "Total $(($(date +%s) - start)) s; $failed part(s) failed."; } >>"$summary"
echo "device_run: total $(($(date +%s) - start)) s, $failed failed; files in $out: $(ls "$out" | tr '\n' ' ')"
[ "$failed" -eq 0 ]
