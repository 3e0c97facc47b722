#!/usr/bin/env bash
# CI stage: the Python package (docs/python.md). In a new virtual environment: PyTorch, NumPy, ONNX,
# onnxruntime, safetensors and pytest from PyPI; a wheel of this tree built with `python -m build --wheel`
# (meson-python: the core, the io library and the extension, release, no tests, tools or
# benchmarks) and installed; then python/tests under pytest (the NumPy API, and rnncore.torch
# against torch.nn: forward, gradients, PackedSequence, opcheck, torch.compile, dropout, errors);
# then examples/pipeline/pipeline.py (train with rnncore.torch, quantize, export a C header, build
# the Cortex-M4F firmware and run it under qemu-system-arm; it must PASS: the firmware's int8
# outputs equal the host's), reusing .ci/stage_cross.sh's build-cross/cortex-m4f when it is there;
# then bench/gpu/flashrnn_compare.py's dry run (FlashRNN from PyPI on the CPU against nn.LSTM).
# Each pytest test counts (a skipped one as a failure: here every dependency is installed), and
# so do the installs and the build. Ends with "STAGE_RESULT passed=N failed=M".
#
# Locally, reusing a venv that has torch: RNNCORE_PYTHON_VENV=/path/to/venv bash .ci/stage_python.sh
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "stage_python: ok: $*"; }
bad() { failed=$((failed + 1)); echo "stage_python: FAILED: $*"; }
log() { printf '\n=== python: %s\n' "$*"; }
start=$(date +%s)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
log "installing Python, its headers and the build dependencies"
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends \
         g++ pkg-config libxsimd-dev nlohmann-json3-dev python3-dev python3-venv meson ninja-build \
         gcc-arm-none-eabi binutils-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-dev \
         qemu-system-arm >/dev/null; }; then
  bad "apt-get install"
fi

work=$(mktemp -d /tmp/rnncore-python.XXXXXX)
trap 'rm -rf "$work"' EXIT
venv=${RNNCORE_PYTHON_VENV:-$work/venv}
if [ -z "${RNNCORE_PYTHON_VENV:-}" ]; then
  log "a venv with torch, numpy, safetensors, onnx, onnxruntime, pytest and build from PyPI"
  t0=$(date +%s)
  if python3 -m venv "$venv" && "$venv/bin/pip" install -q torch numpy safetensors onnx onnxruntime pytest build; then
    ok "pip install torch numpy safetensors onnx onnxruntime pytest build ($(( $(date +%s) - t0 )) s)"
  else
    bad "pip install torch numpy safetensors onnx onnxruntime pytest build"
  fi
elif ! (cd "$work" && "$venv/bin/python" -c "import build.__main__") 2>/dev/null; then
  "$venv/bin/pip" install -q build || bad "pip install build"
fi

log "python -m build --wheel; pip install the wheel"
t0=$(date +%s)
# From the work directory: in the tree, Meson's build/ directory would shadow the `build` package.
if (cd "$work" && "$venv/bin/python" -m build --wheel --outdir "$work/dist" "$root" >"$work/build.log" 2>&1) &&
   "$venv/bin/pip" install -q --force-reinstall --no-deps "$work"/dist/rnncore-*.whl; then
  ok "wheel $(basename "$work"/dist/rnncore-*.whl) built and installed ($(( $(date +%s) - t0 )) s)"
else
  tail -n 60 "$work/build.log"
  bad "python -m build --wheel / pip install"
fi

log "pytest python/tests"
# From the work directory, so that `import rnncore` finds the installed package, not the sources.
(cd "$work" && "$venv/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$work/junit.xml" "$root/python/tests")
if [ -f "$work/junit.xml" ]; then
  counts=$(cd "$work" && "$venv/bin/python" -c '
import sys, xml.etree.ElementTree as ET
s = ET.parse(sys.argv[1]).getroot()
s = s if s.tag == "testsuite" else s.find("testsuite")
print(*(s.get(k, "0") for k in ("tests", "failures", "errors", "skipped")))' "$work/junit.xml")
  read -r tests failures errors skipped <<<"$counts"
  passed=$((passed + tests - failures - errors - skipped))
  failed=$((failed + failures + errors + skipped))
  [ "$skipped" -gt 0 ] && echo "stage_python: $skipped skipped test(s) counted as failures"
else
  bad "pytest wrote no report"
fi
log "examples/pipeline/pipeline.py: training to firmware"
t0=$(date +%s)
m4=$root/build-cross/cortex-m4f
[ -f "$m4/build.ninja" ] || m4=$work/build-m4f
if (cd "$work" && "$venv/bin/python" "$root/examples/pipeline/pipeline.py" --work "$work/pipeline" --m4-build "$m4"); then
  ok "examples/pipeline/pipeline.py ($(( $(date +%s) - t0 )) s)"
else
  bad "examples/pipeline/pipeline.py"
fi
log "bench/gpu/flashrnn_compare.py --dry-run: FlashRNN's PyTorch backend against nn.LSTM"
# (the device comparison's layouts of Wx, R and b, checked where a PyTorch is; no GPU, no timing)
t0=$(date +%s)
mkdir -p "$work/flashrnn-kit/wheels"
if "$venv/bin/python" -m pip download -q --no-deps --only-binary :all: -d "$work/flashrnn-kit/wheels" \
     -r "$root/bench/gpu/flashrnn_requirements.txt" &&
   (cd "$work" && "$venv/bin/python" "$root/bench/gpu/flashrnn_compare.py" --kit "$work/flashrnn-kit" \
     --rnncore "$root/build/tools/rnncore" --dry-run --out "$work/flashrnn-out" >"$work/flashrnn.log" 2>&1); then
  ok "flashrnn_compare.py --dry-run ($(( $(date +%s) - t0 )) s)"
else
  tail -n 20 "$work/flashrnn.log" 2>/dev/null
  bad "flashrnn_compare.py --dry-run"
fi
echo "stage_python: $(( $(date +%s) - start )) s"
echo "STAGE_RESULT passed=$passed failed=$failed"
