#!/usr/bin/env bash
# Guest instructions per LSTM time step on an emulated Cortex-M4F (qemu-system-arm -M mps2-an386),
# the integer LSTM (int8 weights, src/int8_lstm_step.cpp with the kernel int8_lstm_prepare picks) against
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
# print their paths and stop: no plugin, no qemu; .ci/stage_cross.sh checks them so), CELL_LOG2
# (the int8 cell state's scale 2^CELL_LOG2, default −11 with a cell clip of 10; others without a
# clip: −15 and −14 are what Keras conversions without a clip get, and their tanh is not tabled).
#
# CMSIS_NN=<a CMSIS-NN source tree> adds ARM CMSIS-NN's integer LSTM (arm_lstm_unidirectional_s8,
# the function TFLite Micro's CMSIS-NN kernel calls) on the same weights, inputs and quantization
# (bench/cortex_m/bench_cmsis_nn_lstm.c), counted the same way, its library compiled at -Os and at
# -O2, and a check image that runs both LSTMs and counts differing outputs. CMSIS-NN is not part of
# this repository: git clone https://github.com/ARM-software/CMSIS-NN (docs/int8.md, "Against
# CMSIS-NN", names the commit measured). It needs no other CMSIS headers. Without CMSIS_NN the
# script prints what it printed before.
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
CELL_LOG2=${CELL_LOG2:--11}
CELL_TAG=$([ "$CELL_LOG2" = -11 ] || echo "-C$CELL_LOG2")
if [ -n "$CELL_TAG" ] && [ -n "${CMSIS_NN:-}" ]; then
  echo "cortex_m_int8_counts.sh: CMSIS_NN compares at the default CELL_LOG2 (-11) only" >&2
  exit 2
fi
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
# The library's block of units (src/internal/int8_lstm.hpp, kUnitBlock), which the kernel-only
# images repeat: 16 where the build defines it so (firmware without activation tables).
UNIT_BLOCK=()
if grep -q -- '-DRNNCORE_Q8_UNIT_BLOCK=16' "$BUILD/compile_commands.json"; then UNIT_BLOCK=(-DRNNCORE_Q8_UNIT_BLOCK=16); fi

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
  local name=$WORK/img/lstm-$1-H$2-T$3-R$4$CELL_TAG.elf
  if [ ! -f "$name" ] || [ "$REPO/bench/cortex_m/bench_lstm.cpp" -nt "$name" ] || [ "$BUILD/librnncore.a" -nt "$name" ]; then
    nice -n "$NICE" arm-none-eabi-g++ "${CPU[@]}" -std=c++17 -Os -fno-exceptions -fno-rtti -fno-threadsafe-statics \
      -ffunction-sections -fdata-sections -I"$REPO" -I"$REPO/include" \
      -DBENCH_INT8="$1" -DBENCH_H="$2" -DBENCH_T="$3" -DBENCH_REPS="$4" -DBENCH_CELL_LOG2="$CELL_LOG2" \
      "${UNIT_BLOCK[@]+"${UNIT_BLOCK[@]}"}" -c "$REPO/bench/cortex_m/bench_lstm.cpp" -o "$name.o"
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" --specs=nano.specs -nostartfiles -T"$FW/mps2/mps2.ld" -Wl,--gc-sections \
      -o "$name" "$name.o" "$objs/console.o" "$objs/startup.o" "$objs/semihosting.o" "$BUILD/librnncore.a" -lm
  fi
  echo "$name"
}

emulate() {  # IMAGE COUNT_FILE -> the image's instructions (counted once per image; its report in COUNT_FILE.log)
  local img=$1 f=$2
  if [ ! -s "$f" ] || [ "$img" -nt "$f" ]; then
    nice -n "$NICE" qemu-system-arm -M mps2-an386 -display none -serial null -monitor none -semihosting \
      -plugin "$plugin,out=$f.tmp" -d plugin -kernel "$img" >"$f.log" 2>&1 </dev/null ||
      { cat "$f.log" >&2; exit 1; }
    mv "$f.tmp" "$f"
  fi
  cat "$f"
}

count() {  # int8 H T R -> instructions of the whole emulated run; the image's report in .log
  local img
  img=$(image "$@")
  emulate "$img" "$WORK/counts/lstm-$1-H$2-T$3-R$4$CELL_TAG"
}

# CMSIS-NN (only with CMSIS_NN set): the LSTM's sources, compiled at -Os or -O2 into a library.
CMSIS_NN=${CMSIS_NN:-}
CMSIS_SRCS="LSTMFunctions/arm_lstm_unidirectional_s8.c NNSupportFunctions/arm_nn_lstm_step_s8.c
  NNSupportFunctions/arm_nn_lstm_calculate_gate_s8_s16.c NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s8_s16.c
  NNSupportFunctions/arm_nntables.c ActivationFunctions/arm_nn_activation_s16.c
  BasicMathFunctions/arm_elementwise_mul_s16.c BasicMathFunctions/arm_elementwise_mul_acc_s16.c
  BasicMathFunctions/arm_elementwise_mul_s16_s8.c FullyConnectedFunctions/arm_vector_sum_s8.c"
cmsis_commit() { git -C "$CMSIS_NN" rev-parse HEAD 2>/dev/null || echo "unknown (not a git work tree)"; }
cmsis_lib() {  # Os|O2 -> path of the library
  local dir=$WORK/cmsis-nn-$1 stamp
  stamp="$CMSIS_NN $(cmsis_commit)"
  if [ ! -f "$dir/libcmsisnn.a" ] || [ "$(cat "$dir/stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    for f in $CMSIS_SRCS; do
      nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -"$1" -ffunction-sections -fdata-sections \
        -I"$CMSIS_NN/Include" -c "$CMSIS_NN/Source/$f" -o "$dir/$(basename "${f%.c}").o"
    done
    arm-none-eabi-ar rcs "$dir/libcmsisnn.a" "$dir"/*.o
    echo "$stamp" >"$dir/stamp"
  fi
  echo "$dir/libcmsisnn.a"
}
cmsis_image() {  # Os|O2 H T R check -> path of the image (check 1: also runs rnncore's int8 LSTM)
  local name=$WORK/img/cmsis-$1-H$2-T$3-R$4-C$5.elf lib
  lib=$(cmsis_lib "$1")
  if [ ! -f "$name" ] || [ "$REPO/bench/cortex_m/bench_cmsis_nn_lstm.c" -nt "$name" ] || [ "$lib" -nt "$name" ] ||
     { [ "$5" = 1 ] && [ "$BUILD/librnncore.a" -nt "$name" ]; }; then
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -Os -ffunction-sections -fdata-sections \
      -I"$REPO" -I"$REPO/include" -I"$CMSIS_NN/Include" \
      -DBENCH_H="$2" -DBENCH_T="$3" -DBENCH_REPS="$4" -DBENCH_CHECK="$5" \
      -c "$REPO/bench/cortex_m/bench_cmsis_nn_lstm.c" -o "$name.o"
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" --specs=nano.specs -nostartfiles -T"$FW/mps2/mps2.ld" -Wl,--gc-sections \
      -o "$name" "$name.o" "$objs/console.o" "$objs/startup.o" "$objs/semihosting.o" "$lib" "$BUILD/librnncore.a" -lm
  fi
  echo "$name"
}
cmsis_count() {  # Os|O2 H T R check -> instructions of the whole emulated run; the image's report in .log
  local img
  img=$(cmsis_image "$@")
  emulate "$img" "$WORK/counts/cmsis-$1-H$2-T$3-R$4-C$5"
}

if [ "$BUILD_ONLY" = 1 ]; then
  for H in $SHAPES; do image 1 "$H" $T2 2; image 0 "$H" $T2 2; done
  if [ -n "$CMSIS_NN" ]; then
    for H in $SHAPES; do cmsis_image Os "$H" $T2 2 0; cmsis_image O2 "$H" $T2 2 0; cmsis_image Os "$H" 16 4 1; done
  fi
  exit 0
fi

field() { grep -o " $2=[^ ]*" "$1" | head -1 | cut -d= -f2; }

echo "$(qemu-system-arm --version | head -1); $(arm-none-eabi-gcc --version | head -1); -mcpu=cortex-m4 -mfpu=fpv4-sp-d16, library -Os (firmware profile; the integer LSTM -O2)."
echo "Guest instructions (not cycles); T1 = $T1, T2 = $T2 steps, double difference over 1 and 2 passes."
echo
echo "| H = I | MACs/step | int8 instr/step | int8 instr/MAC | of which the kernel (instr/MAC) | int8 interleaved: instr/step | instr/MAC | of which the kernel (instr/MAC) | int8, scalar kernel: instr/step | int8 per-channel: instr/step | f32 instr/step | f32 instr/MAC | f32 / int8 |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
mem_rows=()
declare -A rnncore_int8 rnncore_int8i
for H in $SHAPES; do
  macs=$((4 * H * (H + H)))
  declare -A step
  for m in 1 3 5 6 2 4 0; do
    n11=$(count $m "$H" $T1 1); n12=$(count $m "$H" $T1 2)
    n21=$(count $m "$H" $T2 1); n22=$(count $m "$H" $T2 2)
    step[$m]=$(((n22 - n21 - n12 + n11) / (T2 - T1)))
  done
  rnncore_int8[$H]=${step[1]}
  rnncore_int8i[$H]=${step[5]}
  # The int8 runs with the picked, the scalar and the interleaved kernel must end in the same state, bit for bit.
  for T in $T1 $T2; do for R in 1 2; do for m in 2 5; do
    if [ "$(grep -o 'checksum=[0-9]*' "$WORK/counts/lstm-1-H$H-T$T-R$R$CELL_TAG.log")" != \
         "$(grep -o 'checksum=[0-9]*' "$WORK/counts/lstm-$m-H$H-T$T-R$R$CELL_TAG.log")" ]; then
      echo "int8 H=$H T=$T R=$R: the final state differs between the picked kernel and variant $m" >&2
      exit 1
    fi
  done; done; done
  l8=$WORK/counts/lstm-1-H$H-T$T2-R2$CELL_TAG.log
  l32=$WORK/counts/lstm-0-H$H-T$T2-R2$CELL_TAG.log
  kernel=$(grep -o 'kernel=[^ ]*' "$l8" | cut -d= -f2)
  awk -v H="$H" -v m="$macs" -v a="${step[1]}" -v k="${step[3]}" -v i="${step[5]}" -v ik="${step[6]}" -v s="${step[2]}" \
    -v c="${step[4]}" -v b="${step[0]}" \
    'BEGIN { printf "| %d | %d | %d | %.2f | %d (%.2f) | %d | %.2f | %d (%.2f) | %d | %d | %d | %.2f | %.2f |\n", H, m, a, a / m, k, k / m, i, i / m, ik, ik / m, s, c, b, b / m, b / a }'
  i8=$WORK/img/lstm-1-H$H-T$T2-R2$CELL_TAG.elf
  f32=$WORK/img/lstm-0-H$H-T$T2-R2$CELL_TAG.elf
  # text and rodata of the image (code, constants; the bench generates its weights into RAM)
  t8=$(arm-none-eabi-size -A "$i8" | awk '$1 == ".text" { print $2 }')
  t32=$(arm-none-eabi-size -A "$f32" | awk '$1 == ".text" { print $2 }')
  li=$WORK/counts/lstm-5-H$H-T$T2-R2$CELL_TAG.log
  kernel_i=$(grep -o 'kernel=[^ ]*' "$li" | cut -d= -f2)
  mem_rows+=("| $H | $(field "$l8" weight_bytes) + $(field "$l8" bias_bytes) | $(field "$l32" weight_bytes) | $t8 | $t32 | $(field "$l8" state_bytes) | $(field "$l8" scratch_bytes) | $(field "$l8" eff_bias_bytes) | $(field "$l8" params_bytes) | $(field "$l8" stack_bytes) | $(field "$li" scratch_bytes) | $(field "$li" stack_bytes) | $(field "$l32" state_bytes) | $(field "$l32" packed_bytes) | $(field "$l32" workspace_bytes) | $(field "$l32" stack_bytes) |")
done
echo
echo "Memory (bytes). Flash: weights (int8: int8 weights + int32 biases; f32: canonical floats) and the image's .text (code and constants, weights excluded). RAM: int8 state (h int8 + c int16), scratch, effective biases, the prepared parameters, stack high-water during the run; f32 state (h, c), packed weights (the C API packs into caller RAM), workspace, stack."
echo
echo "| H | int8 weights + biases | f32 weights | int8 image .text | f32 image .text | int8 state | int8 scratch | int8 eff. biases | int8 params | int8 stack | int8 interleaved scratch | int8 interleaved stack | f32 state | f32 packed | f32 workspace | f32 stack |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in "${mem_rows[@]}"; do echo "$r"; done
echo
echo "int8 kernel picked by int8_lstm_prepare: $kernel; with interleaved weights: $kernel_i."

[ -n "$CMSIS_NN" ] || exit 0

# CMSIS-NN's arm_lstm_unidirectional_s8 on the same model, counted the same way.
echo
echo "CMSIS-NN $(cmsis_commit) ($CMSIS_NN): arm_lstm_unidirectional_s8, batch-major, B = 1; its sources at -Os or -O2, the bench at -Os; the same T1, T2, passes and double difference."
echo
echo "| H = I | MACs/step | rnncore int8 instr/step | rnncore interleaved | CMSIS-NN -Os instr/step | instr/MAC | CMSIS-NN -O2 instr/step | instr/MAC | CMSIS-NN -Os / rnncore | CMSIS-NN -O2 / rnncore | CMSIS-NN -O2 / rnncore interleaved |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
cmsis_mem=()
cmsis_check=()
for H in $SHAPES; do
  macs=$((4 * H * (H + H)))
  declare -A cstep
  for o in Os O2; do
    n11=$(cmsis_count $o "$H" $T1 1 0); n12=$(cmsis_count $o "$H" $T1 2 0)
    n21=$(cmsis_count $o "$H" $T2 1 0); n22=$(cmsis_count $o "$H" $T2 2 0)
    cstep[$o]=$(((n22 - n21 - n12 + n11) / (T2 - T1)))
  done
  awk -v H="$H" -v m="$macs" -v r="${rnncore_int8[$H]}" -v i="${rnncore_int8i[$H]}" -v s="${cstep[Os]}" -v t="${cstep[O2]}" \
    'BEGIN { printf "| %d | %d | %d | %d | %d | %.2f | %d | %.2f | %.2f | %.2f | %.2f |\n", H, m, r, i, s, s / m, t, t / m, s / r, t / r, t / i }'
  ls=$WORK/counts/cmsis-Os-H$H-T$T2-R2-C0.log
  l2=$WORK/counts/cmsis-O2-H$H-T$T2-R2-C0.log
  ts=$(arm-none-eabi-size -A "$WORK/img/cmsis-Os-H$H-T$T2-R2-C0.elf" | awk '$1 == ".text" { print $2 }')
  t2=$(arm-none-eabi-size -A "$WORK/img/cmsis-O2-H$H-T$T2-R2-C0.elf" | awk '$1 == ".text" { print $2 }')
  cmsis_mem+=("| $H | $(field "$ls" weight_bytes) + $(field "$ls" bias_bytes) | $ts | $t2 | $(field "$ls" state_bytes) | $(field "$ls" scratch_bytes) | $(field "$ls" kernel_sum_bytes) | $(field "$ls" params_bytes) | $(field "$ls" output_step_bytes) | $(field "$ls" stack_bytes) | $(field "$l2" stack_bytes) |")
  # Both libraries must end in the same state.
  if [ "$(field "$ls" checksum)" != "$(field "$l2" checksum)" ]; then
    echo "CMSIS-NN H=$H: the final state differs between -Os and -O2" >&2
    exit 1
  fi
  # The check image: CMSIS-NN (-Os) and rnncore's int8 LSTM, 4 passes of 16 steps, every output compared.
  cmsis_count Os "$H" 16 4 1 >/dev/null
  lc=$WORK/counts/cmsis-Os-H$H-T16-R4-C1.log
  grep -q '^CHECK' "$lc" || { cat "$lc" >&2; exit 1; }
  cmsis_check+=("| $H | $(field "$lc" outputs) | $(field "$lc" diff_y) | $(field "$lc" max_abs_y) | $(field "$lc" cells) | $(field "$lc" diff_c) | $(field "$lc" max_abs_c) |")
done
echo
echo "CMSIS-NN memory (bytes). Flash: int8 weights + int32 biases, the image's .text (code and constants: the bench, console and CMSIS-NN's LSTM with its 256-entry sigmoid table). RAM: state (h int8 + c int16), scratch (two int16 gate buffers), kernel sums (the effective biases, 8·H int32), cmsis_nn_lstm_params + context, the op's output per step (it writes every step's h and reads it back as the next step's input), stack high-water."
echo
echo "| H | weights + biases | image .text, -Os | image .text, -O2 | state | scratch | kernel sums | params | output per step | stack, -Os | stack, -O2 |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in "${cmsis_mem[@]}"; do echo "$r"; done
echo
echo "CMSIS-NN against rnncore's int8 LSTM (bit-exact with LiteRT) on the same model and input, 4 passes of 16 steps (the state carried): every step's output h, and the cell state after each pass."
echo
echo "| H | outputs compared | outputs differing | max abs difference | cell states compared | differing | max abs difference |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for r in "${cmsis_check[@]}"; do echo "$r"; done
