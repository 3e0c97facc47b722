#!/usr/bin/env bash
# The four public LSTM models (bench/mcu_models/README.md), whole, on an emulated Cortex-M4F
# (qemu-system-arm -M mps2-an386) and Cortex-M7 (mps2-an500): each model's int8 header exported by
# `rnncore export-c --interleave` from the committed NAME.safetensors and LiteRT's sample, compiled
# into bench/mcu_models/mcu_model.c with the firmware example's MPS2 start-up, linker script and
# semihosting console, linked with librnncore.a of a firmware build (cross/arm-none-eabi-*.ini), run;
# each image must print PASS (every int8 output equal to LiteRT's) with its flash, static RAM and
# stack peak. Each model also as one int8 stack through the one-network C API (mcu_model_plan.c:
# the same header's NAME_stack and NAME_packed, in flash, no pack step; one rnncore_forward per
# inference), image NAME_plan, its workspace sized by a first run that prints the plan's sizes. On the Cortex-M7
# also the f32 weather model on the FPU (weather_f32.c, within 1e-5 of TensorFlow). Prints one
# line per image and exits non-zero if any fails.
#
#   bash bench/mcu_models/run.sh                        # both cores, all four models
#   TARGETS=cortex-m7 MODELS="weather" bash bench/mcu_models/run.sh
#
# Needs: a host build of the `rnncore` tool (RNNCORE, default build/tools/rnncore), gcc-arm-none-eabi
# libnewlib-arm-none-eabi libstdc++-arm-none-eabi-dev, qemu-system-arm, meson, ninja. Env: WORK
# (scratch, default /tmp/rnncore-mcu-models), BUILD_cortex_m4f / BUILD_cortex_m7 (configured
# firmware builds to reuse; default $WORK/build-<target>), MESON_OPTIONS (for the builds it makes),
# NICE (10), VARIANTS ("hand plan": the int8.h image, the one-call image, or both), WEIGHTS
# (interleave, the default: export-c --interleave; interleave-i16: the LSTM weights as int16 panels,
# headers in $WORK/hdr-i16; give it a WORK of its own, the images' names are the same), TOKEN_TABLE
# (1: the headers also with export-c --token-table, and the one-call images of the models with an
# Embedding planned with int8_token_table; headers in $WORK/hdr<weights>-tt). A build of
# -Dmax_layers=N (a smaller plan; the models have at most 2 layers) gives its images RNNCORE_MAX_LAYERS=N,
# and one without training (the firmware profile's default) RNNCORE_TRAINING=0.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$REPO/bench/mcu_models
WORK=${WORK:-/tmp/rnncore-mcu-models}
RNNCORE=${RNNCORE:-$REPO/build/tools/rnncore}
TARGETS=${TARGETS:-"cortex-m4f cortex-m7"}
MODELS=${MODELS:-"simple weather text bidi"}
NICE=${NICE:-10}
VARIANTS=${VARIANTS:-"hand plan"}
FW=$REPO/examples/firmware
WEIGHTS=${WEIGHTS:-interleave}
TOKEN_TABLE=${TOKEN_TABLE:-0}
HDR=$WORK/hdr${WEIGHTS#interleave}
TT=()
if [ "$TOKEN_TABLE" = 1 ]; then HDR=$HDR-tt TT=(--token-table); fi
mkdir -p "$HDR"

# The model headers (target-independent): int8, interleaved; the f32 weather LSTM.
fresh() { [ -f "$1" ] && [ "$1" -nt "$2" ] && [ "$1" -nt "$RNNCORE" ]; }
for m in $MODELS; do
  h=$HDR/$m.h
  tt=()
  [ "$m" = weather ] || tt=("${TT[@]}")  # (every model but weather starts with an Embedding)
  fresh "$h" "$HERE/$m.safetensors" ||
    "$RNNCORE" export-c --weights "$HERE/$m.safetensors" --name "$m" --sample-input "$HERE/${m}_input.npy" \
      --sample-output "$HERE/${m}_expected_y.npy" --output "$h" --"$WEIGHTS" "${tt[@]}" >&2
done
case " $MODELS " in *" weather "*)
  fresh "$HDR/weather_f32.h" "$HERE/weather_f32.safetensors" ||
    "$RNNCORE" export-c --weights "$HERE/weather_f32.safetensors" --name weather_f32 --max-batch 1 --max-seq-len 24 \
      --output "$HDR/weather_f32.h" >&2 ;;
esac

cpu_flags() { sed -n "s/^cpu_flags = \[\(.*\)\]/\1/p" "$REPO/cross/arm-none-eabi-$1.ini" | tr -d "',"; }
qemu_machine() { sed -n "s/^qemu_machine = '\(.*\)'/\1/p" "$REPO/cross/arm-none-eabi-$1.ini"; }

failed=0
for target in $TARGETS; do
  var=BUILD_${target//-/_}
  build=${!var:-$WORK/build-$target}
  if [ ! -f "$build/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$build" "$REPO" --cross-file "$REPO/cross/arm-none-eabi-$target.ini" ${MESON_OPTIONS:-} \
      >"$WORK/setup-$target.log" 2>&1 || { cat "$WORK/setup-$target.log" >&2; exit 1; }
  fi
  nice -n "$NICE" ninja -C "$build" librnncore.a >&2
  # The build's layer limit and training (meson options max_layers, training; training auto is off in
  # the firmware profile): the images see the library's RNNCORE_MAX_LAYERS and RNNCORE_TRAINING.
  read -r layers training < <(meson introspect --buildoptions "$build" | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
t = o.get("training", "auto")
print(o["max_layers"], int(t == "true" or (t == "auto" and o["profile"] != "firmware")))')
  DEFS=(-DRNNCORE_MAX_LAYERS="$layers" -DRNNCORE_TRAINING="$training")
  read -r -a CPU <<<"$(cpu_flags "$target")"
  objs=$WORK/objs-$target
  mkdir -p "$objs"
  # (the console's line buffer 16 bytes, written out in parts: the images' RAM without a console's)
  for f in console.c mps2/startup.c mps2/semihosting.c; do
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -Os -ffunction-sections -I"$REPO/include" -I"$FW" "${DEFS[@]}" \
      -DCONSOLE_LINE_BYTES=16 -c "$FW/$f" -o "$objs/$(basename "${f%.c}").o"
  done
  link() {  # image objects...
    local out=$1
    shift
    nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" --specs=nano.specs -nostartfiles -T"$FW/mps2/mps2.ld" \
      -Wl,--gc-sections -o "$out" "$@" "$objs/console.o" "$objs/startup.o" "$objs/semihosting.o" \
      "$build/librnncore.a" -lm
  }
  run_image() {  # name image
    local log=$WORK/$target-$1.log
    if timeout 600 qemu-system-arm -M "$(qemu_machine "$target")" -display none -serial null -monitor none \
         -semihosting -kernel "$2" >"$log" 2>&1 </dev/null && grep -q '^PASS' "$log"; then
      echo "$target $1: $(grep '^PASS' "$log")"
    else
      echo "$target $1: FAILED"; cat "$log"; failed=$((failed + 1))
    fi
  }
  for m in $MODELS; do
    uc=$(echo "$m" | tr a-z A-Z)
    extra=()
    grep -q "^#define ${uc}_EMBEDDING 1" "$HDR/$m.h" && extra+=(-DMODEL_EMBEDDING=1) || extra+=(-DMODEL_EMBEDDING=0)
    [ "$m" = weather ] && extra+=("-DMODEL_STATE_HEADER=\"weather_extra.h\"")
    grep -q "^#define ${uc}_FC0_ACTIVATION RNNCORE_INT8_" "$HDR/$m.h" && extra+=(-DMODEL_HEAD_TABLE=1)
    grep -q "^#define ${uc}_TOKEN_TABLE 1" "$HDR/$m.h" && extra+=(-DMODEL_TOKEN_TABLE=1)
    cc_model() {  # source object defines...
      local src=$1 obj=$2
      shift 2
      nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -Os -ffunction-sections -fdata-sections \
        -I"$REPO/include" -I"$FW" -I"$HDR" -I"$HERE" "${DEFS[@]}" -DMODEL="$m" -DMODEL_UC="$uc" \
        "-DMODEL_HEADER=\"$m.h\"" "${extra[@]}" "$@" -c "$src" -o "$obj"
    }
    if [[ " $VARIANTS " == *" hand "* ]]; then
      img=$WORK/$target-$m.elf
      cc_model "$HERE/mcu_model.c" "$img.o"
      link "$img" "$img.o"
      run_image "$m" "$img"
    fi
    if [[ " $VARIANTS " == *" plan "* ]]; then
      # One call: a first image plans and prints the plan's packed and workspace bytes and the plan
      # value itself; the second has a workspace of that size and (PLAN=const, the default) that
      # plan as a const value in flash (PLAN=ram: planned at start into RAM, as the first).
      img=$WORK/$target-${m}_plan.elf
      cc_model "$HERE/mcu_model_plan.c" "$img.o" -DMODEL_SIZES_ONLY
      link "$img" "$img.o"
      first=$(timeout 600 qemu-system-arm -M "$(qemu_machine "$target")" -display none -serial null -monitor none \
                -semihosting -kernel "$img" </dev/null 2>&1)
      sizes=$(sed -n 's/^SIZES packed=\([0-9]*\) workspace=\([0-9]*\).*/\1 \2/p' <<<"$first")
      if [ -z "$sizes" ]; then echo "$target ${m}_plan: FAILED (no sizes)"; failed=$((failed + 1)); continue; fi
      read -r packed ws <<<"$sizes"
      plan_def=()
      if [ "${PLAN:-const}" = const ]; then
        { printf '#define MODEL_PLAN_INIT '; sed -n 's/^PLAN //p' <<<"$first" | tr '\n' ' ' |
            sed 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; echo; } >"$WORK/$target-${m}_plan_value.h"
        plan_def=("-DMODEL_PLAN_HEADER=\"$target-${m}_plan_value.h\"" -I"$WORK")
      fi
      cc_model "$HERE/mcu_model_plan.c" "$img.o" -DWORKSPACE_BYTES="$ws" "${plan_def[@]}"
      link "$img" "$img.o"
      run_image "${m}_plan" "$img"
    fi
    if [ "$m" = weather ]; then  # the float model on the FPU
      img=$WORK/$target-weather_f32.elf
      nice -n "$NICE" arm-none-eabi-gcc "${CPU[@]}" -std=c99 -Os -ffunction-sections -fdata-sections \
        -I"$REPO/include" -I"$FW" -I"$HDR" -I"$HERE" "${DEFS[@]}" -c "$HERE/weather_f32.c" -o "$img.o"
      link "$img" "$img.o"
      run_image weather_f32 "$img"
    fi
  done
done
[ "$failed" -eq 0 ]
