#!/usr/bin/env bash
# CI stage: fuzz the host-side readers for a short, bounded time each — the .npy and safetensors
# readers (hand-written: nothing packaged reads them without exceptions) and the JSON layer over
# nlohmann/json (source offsets, depth and duplicate-key checks). tests/fuzz/fuzz_io.cpp is the
# libFuzzer harness; it runs under AddressSanitizer and UndefinedBehaviorSanitizer and checks
# round-trip invariants. One result per target; a crash keeps its reproducer in the log.
# RNNCORE_FUZZ_SECONDS (default 60) bounds each target; the three run at once.
# Ends with "STAGE_RESULT passed=N failed=M".
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "stage_fuzz: ok: $*"; }
bad() { failed=$((failed + 1)); echo "stage_fuzz: FAILED: $*"; }
seconds=${RNNCORE_FUZZ_SECONDS:-60}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
echo "=== installing clang 14 with libFuzzer and nlohmann-json"
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends \
         clang-14 libclang-rt-14-dev nlohmann-json3-dev >/dev/null; }; then
  bad "apt-get install clang-14 libclang-rt-14-dev nlohmann-json3-dev"
fi

work=$(mktemp -d /tmp/rnncore-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "=== building tests/fuzz/fuzz_io.cpp"
if clang++-14 -std=c++17 -g -O1 -fno-rtti -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
     -I. -Iinclude src/io/json.cpp src/io/npy.cpp src/io/safetensors.cpp \
     tests/fuzz/fuzz_io.cpp tests/fuzz/io_test_stub.cpp -o "$work/fuzz_io"; then
  # The three targets fuzz at once (two cores between three: 60 s of wall time, not 180).
  for target in json npy safetensors; do
    mkdir -p "$work/corpus_$target"
    # Seeds: the committed .npy and safetensors test files (each target reads every input).
    (RNNCORE_FUZZ_ONLY=$target timeout $((seconds + 60)) "$work/fuzz_io" -max_total_time="$seconds" \
       -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$work/crash_${target}_" \
       "$work/corpus_$target" tests/data/io examples/models 2>"$work/log_$target"
     echo $? >"$work/rc_$target") &
  done
  echo "=== fuzzing json, npy and safetensors for ${seconds} s"
  wait
  for target in json npy safetensors; do
    if [ "$(cat "$work/rc_$target" 2>/dev/null)" = 0 ]; then
      ok "$target: $(grep -E '^stat::number_of_executed_units' "$work/log_$target" | awk '{print $2}') inputs, no failure"
    else
      tail -n 40 "$work/log_$target"
      for f in "$work"/crash_"${target}"_*; do [ -f "$f" ] && { echo "reproducer $f:"; od -An -c "$f" | head -20; }; done
      bad "$target: the fuzzer found a failure (log above)"
    fi
  done
else
  bad "fuzz harness build"
fi
echo "STAGE_RESULT passed=$passed failed=$failed"
