#!/usr/bin/env bash
# CI stage: the edge targets (cross/*.ini, docs/porting.md).
#   - aarch64 and armv7 (armhf, NEON) Linux: cross-build everything (armhf: but the command-line
#     tool), run the whole test suite under qemu-user (meson's exe_wrapper; cross builds leave out
#     the GPU emulator, host code that the native stages check, tests/meson.build);
#   - Cortex-M4F and Cortex-M7 bare metal, firmware profile: build librnncore.a, the firmware
#     (float and int8) and on-device training examples and the int8 kernel test
#     (tests/cross/int8_kernels_baremetal.cpp), print their sizes, check that each image links no
#     heap, printf or environment, that the float image keeps none of the integer core
#     (rnncore_link_int8, tests/cross/int8_on_call_baremetal.c), and run them under qemu-system-arm (MPS2-AN386 / MPS2-AN500,
#     semihosting): each must print PASS. On the Cortex-M4F also build (not run) the
#     instruction-count bench images (bench/cortex_m_int8_counts.sh).
# Every meson test counts as one test, as do each image's link check; a target that fails to
# configure or build counts as one failure. Ends with "STAGE_RESULT passed=N failed=M".
#
# Locally: bash .ci/stage_cross.sh   (build directories: $RNNCORE_CROSS_BUILD_ROOT, default ./build-cross)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build_root=${RNNCORE_CROSS_BUILD_ROOT:-$root/build-cross}

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive

passed=0
failed=0
summary=()

log() { printf '\n=== cross: %s\n' "$*"; }
fail_one() { failed=$((failed + 1)); summary+=("FAILED: $1"); echo "cross: FAILED: $1"; }
pass_one() { passed=$((passed + 1)); echo "cross: ok: $1"; }

# Adds the results of a build directory's last `meson test` to the totals.
count_results() {
  local dir=$1 target=$2 json="$1/meson-logs/testlog.json"
  if [ ! -f "$json" ]; then fail_one "$target: no test log"; return; fi
  local ok bad
  ok=$(grep -c '"result": "\(OK\|SKIP\|EXPECTEDFAIL\)"' "$json" || true)
  bad=$(grep -c '"result": "\(FAIL\|TIMEOUT\|ERROR\|UNEXPECTEDPASS\)"' "$json" || true)
  passed=$((passed + ok))
  failed=$((failed + bad))
  summary+=("$target: $ok passed, $bad failed")
}

# Configures (afresh) and builds one target; returns non-zero on failure.
build_target() {
  local cross_file=$1 dir=$2
  shift 2  # the rest: meson options
  rm -rf "$dir"
  meson setup "$dir" --cross-file "$cross_file" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  meson compile -C "$dir"
}

log "installing the cross toolchains and emulators"
stage_start=$(date +%s)
if ! { $SUDO apt-get update -qq &&
       $SUDO apt-get install -y -qq --no-install-recommends \
         g++ meson ninja-build pkg-config libxsimd-dev doctest-dev nlohmann-json3-dev libcli11-dev python3 diffutils \
         g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user \
         gcc-arm-none-eabi binutils-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-dev \
         qemu-system-arm >/dev/null; }; then
  fail_one "apt-get install of the cross toolchains"
  echo "STAGE_RESULT passed=$passed failed=$failed"
  exit 1
fi
mkdir -p "$build_root"

# ---- ARM Linux: the whole suite under qemu-user ----
for target in aarch64-linux-gnu arm-linux-gnueabihf; do
  log "$target: build, and the test suite under qemu-user"
  dir="$build_root/$target"
  t0=$(date +%s)
  # armhf leaves the command-line tool out (-Dtools=false: its own tests, and the int8 header
  # tests that export with it): the tool's code is aarch64's and the native stages', and the
  # Cortex-M stages below and .ci/stage_mcu_models.sh run exported headers on 32-bit targets. That
  # saved about 3 of the 8 minutes this target took.
  options=()
  [ "$target" = arm-linux-gnueabihf ] && options=(-Dtools=false)
  if build_target "cross/$target.ini" "$dir" "${options[@]+"${options[@]}"}"; then
    meson test -C "$dir" --print-errorlogs --timeout-multiplier 4
    count_results "$dir" "$target"
  else
    fail_one "$target: configure or build"
  fi
  echo "cross: $target took $(($(date +%s) - t0)) s"
done

# ---- Cortex-M: firmware library, sizes, the example under qemu-system-arm ----
for target in cortex-m4f cortex-m7; do
  log "$target: firmware profile, sizes, and the firmware and training examples under qemu-system-arm"
  dir="$build_root/$target"
  image="$dir/examples/firmware/firmware_lstm.elf"
  int8_image="$dir/examples/firmware/firmware_lstm_int8.elf"
  train_image="$dir/examples/train/train_lstm.elf"
  t0=$(date +%s)
  # The Cortex-M4 build reads the int8 sigmoid and tanh from tables over every int16 argument
  # (int8_activation_tables=signed, 256 KiB, with the finer exp table those builds take), tanh of a
  # cell with 0 integer bits from one more (int8_cell_tanh_bits=0), and leaves the reciprocal table
  # out (tanh of a cell state with 1 or 2 integer bits then takes the Newton-Raphson reciprocal);
  # the Cortex-M7 build computes them with the default reciprocal table (a division and 16 KiB);
  # the tables of |x| (int8_activation_tables=true) get a build of their own below. So
  # int8_kernels_qemu checks all of them, and the step built on each, against the reference.
  # The firmware profile leaves training out (meson option training=auto): the Cortex-M4F build
  # turns it on, so examples/train trains there; on the Cortex-M7 it shows the refusal, and its
  # float image must keep none of the training code (checked below).
  options=()
  if [ "$target" = cortex-m4f ]; then
    options=(-Dint8_activation_tables=signed -Dint8_cell_tanh_bits=0 -Dint8_reciprocal_table=false -Dtraining=true)
  fi
  if build_target "cross/arm-none-eabi-$target.ini" "$dir" "${options[@]}"; then
    echo "--- $target: librnncore.a (firmware profile, -Os), all members"
    arm-none-eabi-size -t "$dir/librnncore.a" | tail -n 1
    echo "--- $target: the firmware example image (examples/firmware)"
    arm-none-eabi-size "$image"
    python3 tests/cross/map_sizes.py "$dir/examples/firmware/firmware_lstm.map"
    # A float-only image links none of the integer core (it would with rnncore_link_int8(); the
    # integer spec's rules, src/int8_spec.cpp, stay: the spec validates every dtype).
    for map in firmware_lstm int8_unlinked_test; do
      if python3 tests/cross/map_sizes.py --absent 'src_int8_(?!spec)' "$dir/examples/firmware/$map.map" | tail -n 1; then
        pass_one "$target: $map.elf keeps none of the integer core"
      else
        fail_one "$target: $map.elf keeps sections of the integer core"
      fi
    done
    if [ "$target" = cortex-m7 ]; then
      if python3 tests/cross/map_sizes.py --absent 'src_(train|train_plan|head_grad)\.cpp' "$dir/examples/firmware/firmware_lstm.map" | tail -n 1; then
        pass_one "$target: firmware_lstm.elf keeps none of the training code (training=auto)"
      else
        fail_one "$target: firmware_lstm.elf keeps sections of the training code"
      fi
    fi
    echo "--- $target: the int8 firmware example image (examples/firmware/main_int8.c)"
    arm-none-eabi-size "$int8_image"
    python3 tests/cross/map_sizes.py "$dir/examples/firmware/firmware_lstm_int8.map"
    echo "--- $target: the on-device training image (examples/train)"
    arm-none-eabi-size "$train_image"
    # The int8 / f32 instruction-count bench (bench/cortex_m_int8_counts.sh): its images are built
    # (H = 32), not run, and held to the same promise below; they link the int8 LSTM.
    bench_images=()
    if [ "$target" = cortex-m4f ]; then
      echo "--- $target: the Cortex-M4 instruction-count bench images (built, not run)"
      if out=$(BUILD="$dir" WORK="$dir/bench-counts" BUILD_ONLY=1 SHAPES=32 bash bench/cortex_m_int8_counts.sh); then
        read -r -a bench_images <<<"$(echo $out)"
        arm-none-eabi-size "${bench_images[@]}"
      else
        fail_one "$target: bench/cortex_m_int8_counts.sh images"
      fi
    fi
    # The firmware profile's promise: an image holds no allocator, printf, environment or C++ runtime.
    for img in "$image" "$int8_image" "$train_image" "$dir/examples/firmware/int8_kernels_test.elf" \
               "$dir/examples/firmware/int8_unlinked_test.elf" "$dir/examples/firmware/int8_linked_test.elf" \
               "${bench_images[@]+"${bench_images[@]}"}"; do
      if [ ! -f "$img" ]; then fail_one "$target: $img was not built"; continue; fi
      forbidden=$(arm-none-eabi-nm "$img" | awk '{print $NF}' |
                  grep -E '^(_?malloc|_malloc_r|_?free|_free_r|_?realloc|_realloc_r|_sbrk|_sbrk_r|_?v?s?n?printf|_svfprintf_r|getenv|_getenv_r|_Zn[wa][jm].*|_Zd[la]Pv.*|__cxa_.*|__gxx_personality.*)$' || true)
      if [ -z "$forbidden" ]; then
        pass_one "$target: $(basename "$img") links no heap, printf, getenv or C++ runtime"
      else
        fail_one "$target: $(basename "$img") links $(echo $forbidden)"
      fi
    done
    meson test -C "$dir" --verbose
    count_results "$dir" "$target"
  else
    fail_one "$target: configure or build"
  fi
  if [ "$target" = cortex-m4f ]; then
    log "$target: the int8 kernels with the activation tables of |x| (int8_activation_tables=true)"
    abs_dir="$dir-abs-tables"
    rm -rf "$abs_dir"
    if meson setup "$abs_dir" --cross-file "cross/arm-none-eabi-$target.ini" -Dint8_activation_tables=true \
         >"$abs_dir.setup.log" 2>&1 && meson compile -C "$abs_dir" examples/firmware/int8_kernels_test; then
      meson test -C "$abs_dir" --no-rebuild --verbose int8_kernels_qemu
      count_results "$abs_dir" "$target (tables of |x|)"
    else
      cat "$abs_dir.setup.log"
      fail_one "$target (tables of |x|): configure or build of int8_kernels_test"
    fi
  fi
  echo "cross: $target took $(($(date +%s) - t0)) s"
done

log "summary ($(($(date +%s) - stage_start)) s)"
for line in "${summary[@]+"${summary[@]}"}"; do echo "$line"; done
echo "STAGE_RESULT passed=$passed failed=$failed"
[ "$failed" -eq 0 ]
