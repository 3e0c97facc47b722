#!/usr/bin/env bash
# CI stage: the four public LSTM models of the Cortex-M record (bench/mcu_models/README.md), whole,
# on an emulated Cortex-M4F and Cortex-M7: bench/mcu_models/run.sh exports each committed model
# with the host's `rnncore export-c --interleave` (its int8.h arrays and its one-call stack and packed
# weights), builds
# its firmware images (int8.h, and one call through rnncore.h) and runs them under
# qemu-system-arm; each image must print PASS (int8 outputs equal to LiteRT's, streamed and from a
# non-zero initial state; the f32 weather model within 1e-5 of TensorFlow). Reuses the release
# build's tool (build/tools/rnncore, .ci/run) and the Cortex-M libraries of .ci/stage_cross.sh
# (build-cross/cortex-m4f, signed tables, and build-cross/cortex-m7) when they are there, else
# builds them. Each image counts as one test. Ends with "STAGE_RESULT passed=N failed=M".
#
# Locally: bash .ci/stage_mcu_models.sh
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
t0=$(date +%s)

if ! { $SUDO apt-get update -qq &&
       $SUDO apt-get install -y -qq --no-install-recommends \
         g++ meson ninja-build pkg-config libxsimd-dev doctest-dev nlohmann-json3-dev libcli11-dev \
         gcc-arm-none-eabi binutils-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-dev \
         qemu-system-arm >/dev/null; }; then
  echo "STAGE_RESULT passed=0 failed=1"
  exit 1
fi

tool=$root/build/tools/rnncore
if [ ! -x "$tool" ]; then
  if ! { { [ -f build/build.ninja ] || meson setup build >/dev/null; } && meson compile -C build tools/rnncore; }; then
    echo "mcu_models: the host tool (rnncore) does not build"
    echo "STAGE_RESULT passed=0 failed=1"
    exit 1
  fi
fi
export RNNCORE=$tool WORK=$root/build-mcu-models
[ -f build-cross/cortex-m4f/build.ninja ] && export BUILD_cortex_m4f=$root/build-cross/cortex-m4f
[ -f build-cross/cortex-m7/build.ninja ] && export BUILD_cortex_m7=$root/build-cross/cortex-m7
out=$(mktemp)
bash bench/mcu_models/run.sh 2>&1 | tee "$out"
passed=$(grep -c ': PASS' "$out" || true)
failed=$(grep -c ': FAILED' "$out" || true)
# per core: 4 models through int8.h, the same 4 in one rnncore_forward, and the f32 weather model
[ "$passed" -eq 18 ] || [ "$failed" -gt 0 ] || failed=1
rm -f "$out"
echo "mcu_models: $(($(date +%s) - t0)) s"
echo "STAGE_RESULT passed=$passed failed=$failed"
[ "$failed" -eq 0 ]
