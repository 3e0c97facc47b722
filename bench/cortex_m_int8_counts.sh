#!/usr/bin/env bash
# Guest instructions per LSTM time step on an emulated Cortex-M4F (qemu-system-arm -M mps2-an386),
# the integer LSTM (int8 weights, src/int8_lstm.cpp with the kernel int8_lstm_prepare picks) against
# the f32 LSTM (the C API on the portable scalar path, max_isa RNNCORE_ISA_NONE), I = H, B = 1.
# Prints a Markdown table (docs/int8.md, "Cortex-M4 instruction counts"). Instruction counts are
# deterministic, but they are not cycles (a Cortex-M4 takes 1 cycle for most of these, 2 for loads
# and more for taken branches and flash wait states).
#
#   bash bench/cortex_m_int8_counts.sh             # H = 16 32 64 128
#   SHAPES="32 64" bash bench/cortex_m_int8_counts.sh
#
# Needs: gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-dev, qemu-system-arm
# with TCG plugin support (API v1: QEMU 6.0-8.x; tested with Debian's 7.2), gcc for the plugin,
# meson, ninja. Env: WORK (scratch directory, default /tmp/rnncore-cortex-m-counts), NICE (19),
# BUILD (a configured Cortex-M4F build directory to reuse; default: $WORK/build-m4 from
# cross/arm-none-eabi-cortex-m4f.ini), BUILD_ONLY=1 (build the int8 and f32 images of each shape,
# print their paths and stop: no plugin, no qemu; .ci/stage_cross.sh checks them so).
#
# Method: the bench image (bench/cortex_m/bench_lstm.cpp, the firmware example's MPS2 start-up,
# linker script and semihosting console) runs R passes of T steps; with N(T, R) the instructions
# of the whole emulated run, per step = [N(T2,2) - N(T2,1) - N(T1,2) + N(T1,1)] / (T2 - T1), T1 = 4,
# T2 = 12: the double difference cancels start-up, weight generation, prepare / packing and each
# pass's fixed cost. MACs per step = 4·H·(I + H).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/rnncore-cortex-m-counts}
NICE=${NICE:-19}
BUILD=${BUILD:-$WORK/build-m4}
SHAPES=${SHAPES:-"16 32 64 128"}
T1=4
T2=12
mkdir -p "$WORK/img" "$WORK/counts"

BUILD_ONLY=${BUILD_ONLY:-0}

# The instruction-counting plugin (bench/qemu_insncount.c).
plugin=$WORK/libinsncount.so
if [ "$BUILD_ONLY" != 1 ] && [ ! -f "$plugin" ]; then
  gcc -O2 -shared -fPIC -o "$plugin" "$REPO/bench/qemu_insncount.c"
fi

# The library (firmware profile, -Os), as the firmware example links it.
if [ ! -f "$BUILD/build.ninja" ]; then
  meson setup "$BUILD" "$REPO" --cross-file "$REPO/cross/arm-none-eabi-cortex-m4f.ini" >"$WORK/setup.log" 2>&1 ||
    { cat "$WORK/setup.log" >&2; exit 1; }
fi
nice -n "$NICE" ninja -C "$BUILD" -j 1 librnncore.a >&2

CPU=(-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard)
FW=$REPO/examples/firmware
objs=$WORK/img/objs
if [ ! -f "$objs/semihosting.o" ]; then
  mkdir -p "$objs"
  for f in console.c mps2/startup.c mps2/semihosting.c; do
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -Os -ffunction-sections -I"$REPO/include" -I"$FW" \
      -c "$FW/$f" -o "$objs/$(basename "${f%.c}").o"
  done
fi

image() {  # int8 H T R -> path of the image
  local name=$WORK/img/lstm-$1-H$2-T$3-R$4.elf
  if [ ! -f "$name" ] || [ "$REPO/bench/cortex_m/bench_lstm.cpp" -nt "$name" ] || [ "$BUILD/librnncore.a" -nt "$name" ]; then
    nice -n "$NICE" arm-none-eabi-g++ "${CPU[@]}" -std=c++17 -Os -fno-exceptions -fno-rtti -fno-threadsafe-statics \
      -ffunction-sections -fdata-sections -I"$REPO" -I"$REPO/include" \
      -DBENCH_INT8="$1" -DBENCH_H="$2" -DBENCH_T="$3" -DBENCH_REPS="$4" \
      -c "$REPO/bench/cortex_m/bench_lstm.cpp" -o "$name.o"
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" --specs=nano.specs -nostartfiles -T"$FW/mps2/mps2.ld" -Wl,--gc-sections \
      -o "$name" "$name.o" "$objs/console.o" "$objs/startup.o" "$objs/semihosting.o" "$BUILD/librnncore.a" -lm
  fi
  echo "$name"
}

count() {  # int8 H T R -> instructions of the whole emulated run; the image's report in .log
  local f=$WORK/counts/lstm-$1-H$2-T$3-R$4 img
  img=$(image "$@")
  if [ ! -s "$f" ] || [ "$img" -nt "$f" ]; then
    nice -n "$NICE" qemu-system-arm -M mps2-an386 -display none -serial null -monitor none -semihosting \
      -plugin "$plugin,out=$f.tmp" -d plugin -kernel "$img" >"$f.log" 2>&1 </dev/null ||
      { cat "$f.log" >&2; exit 1; }
    mv "$f.tmp" "$f"
  fi
  cat "$f"
}

if [ "$BUILD_ONLY" = 1 ]; then
  for H in $SHAPES; do image 1 "$H" $T2 2; image 0 "$H" $T2 2; done
  exit 0
fi

field() { grep -o " $2=[^ ]*" "$1" | head -1 | cut -d= -f2; }

echo "$(qemu-system-arm --version | head -1); $(arm-none-eabi-gcc --version | head -1); -mcpu=cortex-m4 -mfpu=fpv4-sp-d16, library -Os (firmware profile; src/int8_lstm.cpp -O2)."
echo "Guest instructions (not cycles); T1 = $T1, T2 = $T2 steps, double difference over 1 and 2 passes."
echo
echo "| H = I | MACs/step | int8 instr/step | int8 instr/MAC | of which the kernel (instr/MAC) | int8, scalar kernel: instr/step | f32 instr/step | f32 instr/MAC | f32 / int8 |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
mem_rows=()
for H in $SHAPES; do
  macs=$((4 * H * (H + H)))
  declare -A step
  for m in 1 3 2 0; do
    n11=$(count $m "$H" $T1 1); n12=$(count $m "$H" $T1 2)
    n21=$(count $m "$H" $T2 1); n22=$(count $m "$H" $T2 2)
    step[$m]=$(((n22 - n21 - n12 + n11) / (T2 - T1)))
  done
  # The int8 runs with the picked and with the scalar kernel must end in the same state, bit for bit.
  for T in $T1 $T2; do for R in 1 2; do
    if [ "$(grep -o 'checksum=[0-9]*' "$WORK/counts/lstm-1-H$H-T$T-R$R.log")" != \
         "$(grep -o 'checksum=[0-9]*' "$WORK/counts/lstm-2-H$H-T$T-R$R.log")" ]; then
      echo "int8 H=$H T=$T R=$R: the final state differs between the picked and the scalar kernel" >&2
      exit 1
    fi
  done; done
  l8=$WORK/counts/lstm-1-H$H-T$T2-R2.log
  l32=$WORK/counts/lstm-0-H$H-T$T2-R2.log
  kernel=$(grep -o 'kernel=[^ ]*' "$l8" | cut -d= -f2)
  awk -v H="$H" -v m="$macs" -v a="${step[1]}" -v k="${step[3]}" -v s="${step[2]}" -v b="${step[0]}" \
    'BEGIN { printf "| %d | %d | %d | %.2f | %d (%.2f) | %d | %d | %.2f | %.2f |\n", H, m, a, a / m, k, k / m, s, b, b / m, b / a }'
  i8=$WORK/img/lstm-1-H$H-T$T2-R2.elf
  f32=$WORK/img/lstm-0-H$H-T$T2-R2.elf
  # text and rodata of the image (code, constants; the bench generates its weights into RAM)
  t8=$(arm-none-eabi-size -A "$i8" | awk '$1 == ".text" { print $2 }')
  t32=$(arm-none-eabi-size -A "$f32" | awk '$1 == ".text" { print $2 }')
  mem_rows+=("| $H | $(field "$l8" weight_bytes) + $(field "$l8" bias_bytes) | $(field "$l32" weight_bytes) | $t8 | $t32 | $(field "$l8" state_bytes) | $(field "$l8" scratch_bytes) | $(field "$l8" eff_bias_bytes) | $(field "$l8" params_bytes) | $(field "$l8" stack_bytes) | $(field "$l32" state_bytes) | $(field "$l32" packed_bytes) | $(field "$l32" workspace_bytes) | $(field "$l32" stack_bytes) |")
done
echo
echo "Memory (bytes). Flash: weights (int8: int8 weights + int32 biases; f32: canonical floats) and the image's .text (code and constants, weights excluded). RAM: int8 state (h int8 + c int16), scratch, effective biases, the prepared parameters, stack high-water during the run; f32 state (h, c), packed weights (the C API packs into caller RAM), workspace, stack."
echo
echo "| H | int8 weights + biases | f32 weights | int8 image .text | f32 image .text | int8 state | int8 scratch | int8 eff. biases | int8 params | int8 stack | f32 state | f32 packed | f32 workspace | f32 stack |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in "${mem_rows[@]}"; do echo "$r"; done
echo
echo "int8 kernel picked by int8_lstm_prepare: $kernel."
