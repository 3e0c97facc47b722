#!/usr/bin/env bash
# Guest instructions per inference of the four public LSTM models (bench/mcu_models/README.md) on an
# emulated Cortex-M4F (qemu-system-arm -M mps2-an386), the deterministic count of
# bench/cortex_m_int8_counts.sh (the TCG plugin bench/qemu_insncount.c), side by side:
#   rnncore       mcu_model.c on librnncore.a of the default Cortex-M4F build (interleaved weights)
#   rnncore signed  the same on the signed-table build (-Dint8_activation_tables=signed
#                 -Dint8_cell_tanh_bits=0 -Dint8_reciprocal_table=false, as .ci/stage_cross.sh)
#   i16, signed i16  both again with the LSTM weights as int16 panels (export-c --interleave-i16:
#                 twice the weight flash, the kernel i16_dot_panels_4x16__dsp)
#   CMSIS-NN      cmsis_model.c: ARM CMSIS-NN's kernels composed as TFLite Micro's CMSIS-NN kernels
#                 call them for the converter's graph, the library at -O2 and at -Os
#   one call      mcu_model_plan.c (the model as one int8 stack, one rnncore_forward per inference) on
#                 both rnncore builds, each on both headers (kinds plan, plan-signed, plan-i16,
#                 plan-signed-i16): a table of its own beside the hand-composed int8.h path
#   token tables  the one-call images of the models with an Embedding on headers of export-c
#                 --token-table (layer 0's input parts per token in place of W; kinds plan-table,
#                 plan-signed-table, plan-i16-table, plan-signed-i16-table): a last table, against
#                 CMSIS-NN -O2 (ONLY_TABLE=1: that table alone, with CMSIS-NN -O2 counted for it)
# One inference = N(2 inferences) - N(1): the images differ only in a volatile repetition count, so
# start-up, preparation and the checks cancel. Also the instruction mix of that inference and a
# cycle estimate from it (the Cortex-M4 timings in README.md; instruction counts are not cycles),
# where rnncore's instructions go, per function (functions.py), and each image's flash, static
# RAM and stack peak. Prints Markdown tables.
#
#   CMSIS_NN=/path/to/CMSIS-NN bash bench/mcu_models/count.sh
#   MODELS="weather simple" CMSIS_NN=... bash bench/mcu_models/count.sh
#
# Needs what run.sh needs, gcc (the plugin), python3 and a CMSIS-NN source tree (CMSIS_NN; git clone
# https://github.com/ARM-software/CMSIS-NN). Env: WORK (default /tmp/rnncore-mcu-models), BUILD
# and BUILD_SIGNED (Cortex-M4F firmware builds to reuse; default $WORK/build-m4, $WORK/build-m4-signed),
# RNNCORE (the host tool, default build/tools/rnncore), NICE (10), CMSIS_NN_COMMIT (the commit to name when CMSIS_NN is an
# unpacked tree, not a git work tree), ONLY_PLAN=1 (the one-call table only: no CMSIS-NN needed),
# BUILDS (ONLY_PLAN's and ONLY_TABLE's builds: default "rnncore signed"; "rnncore" skips the signed-table
# build), TABLE_KINDS (the token-table table's kinds, default all six below).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/bench/mcu_models
WORK=${WORK:-/tmp/rnncore-mcu-models}
RNNCORE=${RNNCORE:-$REPO/build/tools/rnncore}
MODELS=${MODELS:-"simple weather text bidi"}
BUILD=${BUILD:-$WORK/build-m4}
BUILD_SIGNED=${BUILD_SIGNED:-$WORK/build-m4-signed}
NICE=${NICE:-10}
ONLY_PLAN=${ONLY_PLAN:-0}
ONLY_TABLE=${ONLY_TABLE:-0}
BUILDS=${BUILDS:-"rnncore signed"}
if [ "$ONLY_PLAN" = 1 ]; then CMSIS_NN=${CMSIS_NN:-/nonexistent}; else CMSIS_NN=${CMSIS_NN:?set CMSIS_NN to a CMSIS-NN source tree}; fi
FW=$REPO/examples/firmware
CPU=(-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard)
mkdir -p "$WORK/hdr" "$WORK/hdr16" "$WORK/hdr-rm" "$WORK/hdr-tt" "$WORK/hdr16-tt" "$WORK/count" "$WORK/objs-count"

plugin=$WORK/libinsncount.so
[ "$plugin" -nt "$REPO/bench/qemu_insncount.c" ] || gcc -O2 -shared -fPIC -o "$plugin" "$REPO/bench/qemu_insncount.c"

lib() {  # build-dir meson-options... -> builds librnncore.a
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$REPO" --cross-file "$REPO/cross/arm-none-eabi-cortex-m4f.ini" "$@" >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log" >&2; exit 1; }
  fi
  nice -n "$NICE" ninja -C "$dir" librnncore.a >&2
}
lib "$BUILD"
[[ " $BUILDS " != *" signed "* ]] || lib "$BUILD_SIGNED" -Dint8_activation_tables=signed -Dint8_cell_tanh_bits=0 -Dint8_reciprocal_table=false

objs=$WORK/objs-count
for f in console.c mps2/startup.c mps2/semihosting.c; do  # (the console's line 16 bytes, as run.sh's)
  [ -f "$objs/$(basename "${f%.c}").o" ] ||
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -Os -ffunction-sections -I"$REPO/include" -I"$FW" \
      -DCONSOLE_LINE_BYTES=16 -c "$FW/$f" -o "$objs/$(basename "${f%.c}").o"
done

# CMSIS-NN: the LSTM's and the fully connected layer's sources, at -O2 or -Os.
CMSIS_SRCS="LSTMFunctions/arm_lstm_unidirectional_s8.c NNSupportFunctions/arm_nn_lstm_step_s8.c
  NNSupportFunctions/arm_nn_lstm_calculate_gate_s8_s16.c NNSupportFunctions/arm_nn_vec_mat_mul_result_acc_s8_s16.c
  NNSupportFunctions/arm_nntables.c ActivationFunctions/arm_nn_activation_s16.c
  BasicMathFunctions/arm_elementwise_mul_s16.c BasicMathFunctions/arm_elementwise_mul_acc_s16.c
  BasicMathFunctions/arm_elementwise_mul_s16_s8.c FullyConnectedFunctions/arm_vector_sum_s8.c
  FullyConnectedFunctions/arm_fully_connected_s8.c NNSupportFunctions/arm_nn_vec_mat_mult_t_s8.c"
cmsis_commit() { git -C "$CMSIS_NN" rev-parse HEAD 2>/dev/null || echo "${CMSIS_NN_COMMIT:-unknown} (not a git work tree)"; }
cmsis_lib() {  # O2|Os -> path
  local dir=$WORK/cmsis-nn-models-$1
  if [ ! -f "$dir/libcmsisnn.a" ]; then
    mkdir -p "$dir"
    for f in $CMSIS_SRCS; do
      nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -"$1" -ffunction-sections -fdata-sections \
        -I"$CMSIS_NN/Include" -c "$CMSIS_NN/Source/$f" -o "$dir/$(basename "${f%.c}").o"
    done
    arm-none-eabi-ar rcs "$dir/libcmsisnn.a" "$dir"/*.o
  fi
  echo "$dir/libcmsisnn.a"
}

header() {  # model dir extra-options -> exports the header once
  local h=$WORK/$2/$1.h
  if [ ! -f "$h" ] || [ "$HERE/$1.safetensors" -nt "$h" ]; then
    "$RNNCORE" export-c --weights "$HERE/$1.safetensors" --name "$1" --sample-input "$HERE/${1}_input.npy" \
      --sample-output "$HERE/${1}_expected_y.npy" --output "$h" ${3:-} >/dev/null
  fi
}

image() {  # model kind(rnncore|signed|i16|signed-i16|cmsis-O2|cmsis-Os|plan[-signed][-i16]) reps -> path
  local m=$1 kind=$2 reps=$3 uc img src hdr libs emb defs=()
  uc=$(echo "$m" | tr a-z A-Z)
  img=$WORK/count/$m-$kind-R$reps.elf
  case $kind in
    rnncore) src=mcu_model.c hdr=hdr libs=("$BUILD/librnncore.a") ;;
    signed) src=mcu_model.c hdr=hdr libs=("$BUILD_SIGNED/librnncore.a") ;;
    i16) src=mcu_model.c hdr=hdr16 libs=("$BUILD/librnncore.a") ;;
    signed-i16) src=mcu_model.c hdr=hdr16 libs=("$BUILD_SIGNED/librnncore.a") ;;
    cmsis-*) src=cmsis_model.c hdr=hdr-rm libs=("$(cmsis_lib "${kind#cmsis-}")" "$BUILD/librnncore.a") ;;
    plan) src=mcu_model_plan.c hdr=hdr libs=("$BUILD/librnncore.a") ;;
    plan-signed) src=mcu_model_plan.c hdr=hdr libs=("$BUILD_SIGNED/librnncore.a") ;;
    plan-i16) src=mcu_model_plan.c hdr=hdr16 libs=("$BUILD/librnncore.a") ;;
    plan-signed-i16) src=mcu_model_plan.c hdr=hdr16 libs=("$BUILD_SIGNED/librnncore.a") ;;
    plan-table) src=mcu_model_plan.c hdr=hdr-tt libs=("$BUILD/librnncore.a") ;;
    plan-signed-table) src=mcu_model_plan.c hdr=hdr-tt libs=("$BUILD_SIGNED/librnncore.a") ;;
    plan-i16-table) src=mcu_model_plan.c hdr=hdr16-tt libs=("$BUILD/librnncore.a") ;;
    plan-signed-i16-table) src=mcu_model_plan.c hdr=hdr16-tt libs=("$BUILD_SIGNED/librnncore.a") ;;
  esac
  if grep -q "^#define ${uc}_EMBEDDING 1" "$WORK/$hdr/$m.h"; then emb=1; else emb=0; fi
  if grep -q "^#define ${uc}_FC0_ACTIVATION RNNCORE_INT8_" "$WORK/$hdr/$m.h"; then emb="$emb -DMODEL_HEAD_TABLE=1"; fi
  if grep -q "^#define ${uc}_TOKEN_TABLE 1" "$WORK/$hdr/$m.h"; then emb="$emb -DMODEL_TOKEN_TABLE=1"; fi
  # The one-call image: its workspace sized as the plan asks (a first image prints it).
  if [[ $kind == plan* ]] && [ "$reps" = sizes ]; then defs+=(-DMODEL_SIZES_ONLY); reps=0; fi
  if [[ $kind == plan* ]] && [[ $img != *-Rsizes.elf ]]; then
    local sz
    sz=$(image "$m" "$kind" sizes)
    [ -s "$sz.sizes" ] && [ "$sz.sizes" -nt "$sz" ] ||
      nice -n "$NICE" qemu-system-arm -M mps2-an386 -display none -serial null -monitor none -semihosting \
        -kernel "$sz" </dev/null 2>&1 | sed -n 's/^SIZES packed=\([0-9]*\) workspace=\([0-9]*\).*/\1 \2/p' >"$sz.sizes"
    read -r packed ws <"$sz.sizes"
    defs+=(-DWORKSPACE_BYTES="$ws")
  fi
  if [ ! -f "$img" ] || [ "$HERE/$src" -nt "$img" ] || [ "$WORK/$hdr/$m.h" -nt "$img" ] || [ "${libs[0]}" -nt "$img" ]; then
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -Os -ffunction-sections -fdata-sections \
      -I"$REPO/include" -I"$FW" -I"$WORK/$hdr" -I"$CMSIS_NN/Include" -DMODEL="$m" -DMODEL_UC="$uc" \
      "-DMODEL_HEADER=\"$m.h\"" -DMODEL_EMBEDDING=$emb -DMODEL_COUNT_REPS="$reps" "${defs[@]}" -c "$HERE/$src" -o "$img.o"
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" --specs=nano.specs -nostartfiles -T"$FW/mps2/mps2.ld" \
      -Wl,--gc-sections -o "$img" "$img.o" "$objs/console.o" "$objs/startup.o" "$objs/semihosting.o" \
      "${libs[@]}" -lm
  fi
  echo "$img"
}

emulate() {  # image -> its log, count and mix beside it (counted once per image)
  local img=$1
  if [ ! -s "$img.mix" ] || [ "$img" -nt "$img.mix" ] || { [ ! -f "$img.blocks" ] && [[ $img != *-cmsis-* ]]; }; then
    nice -n "$NICE" qemu-system-arm -M mps2-an386 -display none -serial null -monitor none -semihosting \
      -plugin "$plugin,out=$img.count,mix=$img.mix,blocks=$img.blocks" -d plugin -kernel "$img" >"$img.log" 2>&1 </dev/null ||
      { cat "$img.log" >&2; exit 1; }
  fi
}
field() { grep -o "$2=[0-9]*" "$1" | head -1 | cut -d= -f2; }

# Cycle estimate of a mix (README.md, "Cycle estimate"): 1 per instruction, +1 per single load or
# store, +N for N registers moved by LDM/STM/PUSH/POP, +3 for a POP of the PC, +2 per branch (taken),
# +6 per integer division, +13 per VDIV/VSQRT.
declare -A INSNS CYCLES MEMS MIXES
measure() {  # model kind
  local a b
  a=$(image "$1" "$2" 1)
  b=$(image "$1" "$2" 2)
  emulate "$a"
  emulate "$b"
  INSNS[$1/$2]=$(($(cat "$b.count") - $(cat "$a.count")))
  CYCLES[$1/$2]=$(paste -d' ' "$a.mix" "$b.mix" | awk '{
      n = NF / 2
      for (i = 1; i <= n; ++i) { split($i, p, "="); split($(i + n), q, "="); d[p[1]] = q[2] - p[2] }
      c = d["insns"] + d["load"] + d["store"] + d["multi_regs"] + 3 * d["pop_pc"] + 2 * d["branch"]
      printf "%d", c + 6 * d["div"] + 13 * d["vdiv"] }')
  MEMS[$1/$2]="$(field "$a.log" flash) $(field "$a.log" ram_static) $(field "$a.log" stack_peak)"
  MIXES[$1/$2]=$(paste -d' ' "$a.mix" "$b.mix" | awk '{
      n = NF / 2
      for (i = 1; i <= n; ++i) { split($i, p, "="); split($(i + n), q, "="); printf "%d | ", q[2] - p[2] } }')
}

# The models that start with an Embedding (token tables apply to them).
TABLE_MODELS=""
for m in $MODELS; do [ "$m" = weather ] || TABLE_MODELS="$TABLE_MODELS $m"; done
for m in $MODELS; do
  header "$m" hdr --interleave
  header "$m" hdr16 --interleave-i16
  [ "$ONLY_PLAN" = 1 ] || header "$m" hdr-rm
done
for m in $TABLE_MODELS; do
  header "$m" hdr-tt "--interleave --token-table"
  header "$m" hdr16-tt "--interleave-i16 --token-table"
done

# The one-call images with token tables (export-c --token-table) against CMSIS-NN -O2 and the
# same builds without tables; each table image also run whole once (PASS: every output = LiteRT's).
TABLE_KINDS=${TABLE_KINDS:-"plan-signed plan-signed-i16 plan-table plan-signed-table plan-i16-table plan-signed-i16-table"}
table_table() {
  echo "Token tables (export-c --token-table: layer 0's input parts per token, [vocab][4H] int16, in place of W and"
  echo "the Embedding's table), the one-call images (mcu_model_plan.c): guest instructions per inference (not cycles),"
  echo "CMSIS-NN -O2 / rnncore, the cycle estimate, flash and RAM (bytes; static + stack peak), and the image run whole."
  echo
  echo "| model | kind | insns | -O2 / rnncore | est. cycles | flash | RAM | outputs = LiteRT |"
  echo "|---|---|---:|---:|---:|---:|---:|---|"
  for m in $TABLE_MODELS; do
    measure "$m" cmsis-O2
    for k in $TABLE_KINDS; do
      measure "$m" "$k"
      local chk verdict=""
      if [[ $k == *table ]]; then
        chk=$(image "$m" "$k" 0)
        emulate "$chk"
        verdict=$(grep -o 'PASS\|FAIL' "$chk.log" | tail -1 || echo '?')
      fi
      read -r f r s <<<"${MEMS[$m/$k]}"
      awk -v m="$m" -v k="$k" -v n="${INSNS[$m/$k]}" -v c="${INSNS[$m/cmsis-O2]}" -v e="${CYCLES[$m/$k]}" -v f="$f" \
        -v ram="$r + $s = $((r + s))" -v v="$verdict" \
        'BEGIN { printf "| %s | %s | %d | %.2f | %d | %d | %s | %s |\n", m, k, n, c / n, e, f, ram, v }'
    done
    echo "| $m | cmsis-O2 | ${INSNS[$m/cmsis-O2]} | 1 | ${CYCLES[$m/cmsis-O2]} | $(echo "${MEMS[$m/cmsis-O2]}" | cut -d' ' -f1) | | |"
  done
}
if [ "$ONLY_TABLE" = 1 ]; then
  echo "$(qemu-system-arm --version | head -1); $(arm-none-eabi-gcc --version | head -1); rnncore $(git -C "$REPO" rev-parse --short HEAD); CMSIS-NN $(cmsis_commit)."
  echo
  table_table
  exit 0
fi

# The one-call images (mcu_model_plan.c) beside the hand-composed ones (mcu_model.c), both builds.
plan_table() {
  echo "One call through rnncore.h (the model as one int8 stack, one rnncore_forward) against the hand-composed"
  echo "int8.h path, guest instructions per inference (not cycles) and memory (bytes; RAM = static + stack peak)."
  echo
  echo "| model | build | int8.h insns | one call insns | ratio | int8.h flash | one call flash | int8.h RAM | one call RAM |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  for m in $MODELS; do
    # each build on both headers: interleaved int8 weights (kind rnncore, signed; one call plan,
    # plan-signed) and int16 panels (i16, signed-i16; plan-i16, plan-signed-i16)
    for b in $(for x in $BUILDS; do if [ "$x" = rnncore ]; then echo rnncore i16; else echo "$x" "$x-i16"; fi; done); do
      local p=plan-$b
      [ "$b" = rnncore ] && p=plan
      [ "$b" = i16 ] && p=plan-i16
      measure "$m" "$b"
      measure "$m" "$p"
      read -r fh rh sh <<<"${MEMS[$m/$b]}"
      read -r fp rp sp <<<"${MEMS[$m/$p]}"
      awk -v m="$m" -v b="$b" -v h="${INSNS[$m/$b]}" -v p="${INSNS[$m/$p]}" -v fh="$fh" -v fp="$fp" \
        -v rh="$rh + $sh = $((rh + sh))" -v rp="$rp + $sp = $((rp + sp))" \
        'BEGIN { printf "| %s | %s | %d | %d | %.3f | %d | %d | %s | %s |\n", m, b, h, p, p / h, fh, fp, rh, rp }'
    done
  done
}

if [ "$ONLY_PLAN" = 1 ]; then
  echo "$(qemu-system-arm --version | head -1); $(arm-none-eabi-gcc --version | head -1); rnncore $(git -C "$REPO" rev-parse --short HEAD)."
  echo
  plan_table
  exit 0
fi
echo "$(qemu-system-arm --version | head -1); $(arm-none-eabi-gcc --version | head -1); -mcpu=cortex-m4 -mfpu=fpv4-sp-d16;"
echo "rnncore $(git -C "$REPO" rev-parse --short HEAD) (library -Os, firmware profile); CMSIS-NN $(cmsis_commit)."
echo "Guest instructions per inference (not cycles): N(2 inferences) - N(1 inference), batch 1."
echo
echo "| model | MACs | rnncore | rnncore, signed tables | CMSIS-NN -O2 | CMSIS-NN -Os | -O2 / rnncore | -O2 / signed | est. cycles rnncore | signed | CMSIS-NN -O2 | CMSIS-NN outputs ≠ LiteRT |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
mem_rows=()
i16_rows=()
for m in $MODELS; do
  for k in rnncore signed i16 signed-i16 cmsis-O2 cmsis-Os; do measure "$m" "$k"; done
  chk=$(image "$m" cmsis-O2 0)
  emulate "$chk"
  ndiff=$(grep -o 'cmsis-nn: [0-9]* of [0-9]*' "$chk.log" | cut -d' ' -f2,4 | tr ' ' '/')
  macs=$(awk -v m="$m" 'BEGIN { if (m == "simple") print 100*4*128*(64+128)+128*10;
    else if (m == "weather") print 24*(4*32*(19+32)+32);
    else if (m == "text") print 100*(4*512*(256+512)+512*65);
    else print 16*2*4*64*(128+64)+16*2*4*64*(128+64)+128 }')
  awk -v m="$m" -v macs="$macs" -v r="${INSNS[$m/rnncore]}" -v s="${INSNS[$m/signed]}" -v c="${INSNS[$m/cmsis-O2]}" \
      -v o="${INSNS[$m/cmsis-Os]}" -v er="${CYCLES[$m/rnncore]}" -v es="${CYCLES[$m/signed]}" -v ec="${CYCLES[$m/cmsis-O2]}" \
      -v nd="$ndiff" 'BEGIN { printf "| %s | %d | %d | %d | %d | %d | %.2f | %.2f | %d | %d | %d | %s |\n", m, macs, r, s, c, o, c / r, c / s, er, es, ec, nd }'
  read -r fr rr sr <<<"${MEMS[$m/rnncore]}"
  read -r fs rs ss <<<"${MEMS[$m/signed]}"
  read -r fc rc sc <<<"${MEMS[$m/cmsis-O2]}"
  mem_rows+=("| $m | $fr | $rr + $sr = $((rr + sr)) | $fs | $rs + $ss = $((rs + ss)) | $fc | $rc + $sc = $((rc + sc)) |")
  # The int16 panels: the panel kernel's instructions per LSTM multiply-accumulate (functions.py), the
  # ratios and the flash and RAM beside the interleaved images'.
  lstm_macs=$(awk -v m="$m" 'BEGIN { if (m == "simple") print 100*4*128*(64+128);
    else if (m == "weather") print 24*4*32*(19+32); else if (m == "text") print 100*4*512*(256+512);
    else print 2*16*2*4*64*(128+64) }')
  kernel_insns() {  # kind -> the panel kernel's instructions in one inference
    python3 "$HERE/functions.py" "$m" "$1" "$WORK/count/$m-$1-R1.elf" "$WORK/count/$m-$1-R1.elf.blocks" \
      "$WORK/count/$m-$1-R2.elf.blocks" 1000 | awk -F'|' '/_dot_panels_dsp_4x16/ { gsub(/ /, "", $5); n += $5 } END { print n + 0 }'
  }
  # and whether their outputs equal LiteRT's (the images that check every sample, run whole)
  verdict16=""
  for k in i16 signed-i16; do
    chk=$(image "$m" "$k" 0)
    emulate "$chk"
    verdict16="$verdict16$(grep -o 'PASS\|FAIL' "$chk.log" | tail -1 || echo '?') "
  done
  read -r f16 r16 s16 <<<"${MEMS[$m/i16]}"
  read -r fs16 rs16 ss16 <<<"${MEMS[$m/signed-i16]}"
  i16_rows+=("$(awk -v m="$m" -v macs="$lstm_macs" -v k8="$(kernel_insns rnncore)" -v k16="$(kernel_insns i16)" \
      -v r="${INSNS[$m/i16]}" -v s="${INSNS[$m/signed-i16]}" -v c="${INSNS[$m/cmsis-O2]}" \
      -v e="${CYCLES[$m/signed-i16]}" -v v="$verdict16" -v fr="$fr" -v fs="$fs" -v f16="$f16" -v fs16="$fs16" -v ram16="$((r16 + s16))" -v rams16="$((rs16 + ss16))" \
      'BEGIN { printf "| %s | %.3f | %.3f | %d | %d | %.2f | %.2f | %d | %d (+%d) | %d (+%d) | %d | %d | %s|\n", m, k8 / macs, k16 / macs,
               r, s, c / r, c / s, e, f16, f16 - fr, fs16, fs16 - fs, ram16, rams16, v }')")
done
echo
echo "Memory of the count images (bytes): flash = the image's code and constants (weights, tables, sample, harness); RAM = static (.data + .bss) + stack peak during the inference."
echo
echo "| model | rnncore flash | rnncore RAM | signed flash | signed RAM | CMSIS-NN -O2 flash | CMSIS-NN -O2 RAM |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for r in "${mem_rows[@]}"; do echo "$r"; done
echo
echo "The LSTM weights as int16 panels (export-c --interleave-i16; kernel i16_dot_panels_4x16__dsp) against the interleaved int8 panels"
echo "(i8_dot_panels_4x16__dsp): the panel kernel's instructions per LSTM multiply-accumulate, guest instructions per inference,"
echo "CMSIS-NN -O2 / rnncore with them, and the images' flash (bytes; the change against the interleaved image) and RAM (static + stack peak)."
echo
echo "| model | kernel insn/MAC int8 panels | int16 panels | rnncore i16 | signed i16 | -O2 / i16 | -O2 / signed i16 | est. cycles signed i16 | i16 flash | signed i16 flash | i16 RAM | signed i16 RAM | outputs = LiteRT (i16, signed i16) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for r in "${i16_rows[@]}"; do echo "$r"; done
echo
echo "Instruction mix of one inference (the plugin's classes; multi = LDM/STM/PUSH/POP/VLDM/VSTM, multi_regs their registers, pop_pc the POPs of the PC, branch every B/BL/BX/CBZ/CBNZ/TBB/TBH and LDR to the PC)."
echo
echo "| model | build | insns | load | store | multi | multi_regs | pop_pc | branch | div | vdiv | est. cycles |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for m in $MODELS; do
  for k in rnncore signed i16 signed-i16 cmsis-O2 cmsis-Os; do echo "| $m | $k | ${MIXES[$m/$k]}${CYCLES[$m/$k]} |"; done
done
echo
echo "Where rnncore's instructions of one inference go: the functions that execute the most (the plugin's blocks per function, functions.py; inlined code counts in its caller: int8_lstm_step holds the gates' rescaling and activations, update_cells the cell and its tanh)."
echo
echo "| model | build | function | insns | share |"
echo "|---|---|---|---:|---:|"
for m in $MODELS; do
  for k in rnncore signed i16 signed-i16; do
    a=$WORK/count/$m-$k-R1.elf b=$WORK/count/$m-$k-R2.elf
    python3 "$HERE/functions.py" "$m" "$k" "$a" "$a.blocks" "$b.blocks" 5
  done
done
echo
plan_table
[ -z "$TABLE_MODELS" ] || { echo; table_table; }
