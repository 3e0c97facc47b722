#!/usr/bin/env bash
# Quick start: installs the build dependencies (Debian), builds rnncore, and runs the bundled
# model — a 2-layer PyTorch LSTM (examples/models/) — through `rnncore run`, printing the largest
# deviation from PyTorch's stored output and the time per step. It builds only what that needs (the
# libraries and the tool); `meson test -C build` builds the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends g++ meson ninja-build pkg-config libxsimd-dev doctest-dev \
  nlohmann-json3-dev libcli11-dev >/dev/null

[ -f build/build.ninja ] || meson setup build
ninja -C build tools/rnncore

m=examples/models/lstm_small
./build/tools/rnncore run --weights $m.safetensors --input ${m}_input.npy --output build/lstm_small_y.npy \
  --expect ${m}_expected_y.npy --expect-hn ${m}_expected_hn.npy --expect-cn ${m}_expected_cn.npy \
  --tolerance 1e-5 --repeat 100
