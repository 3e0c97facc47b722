#!/usr/bin/env bash
# Guest instructions per recurrent time step on ARM (issue 11): armv7 (arm-linux-gnueabihf, NEON)
# and aarch64, counted under qemu-user with a small TCG plugin, for two commits of rnncore. Prints
# a Markdown table. Instruction counts are deterministic, but they are not cycles.
#
#   bash bench/arm_instruction_counts.sh [OLD [NEW]]        # defaults: 4ef7988 HEAD
#
# Needs: g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user (with TCG plugin support, plugin
# API v1: QEMU 6.0-8.x; tested with Debian's 7.2), gcc for the plugin, meson, ninja, libxsimd-dev,
# libcli11-dev, nlohmann-json3-dev. Env: WORK (scratch dir, default /tmp/rnncore-arm-counts; counts
# are cached there, so an interrupted run resumes), NICE (default 19), JOBS (ninja -j, default 1),
# ARM_SHAPES (a subset, e.g. "lstm 256 16;gru 512 16"; default: the table's eight shapes).
# Takes about 30 min on one core (4 cross builds, 128 runs under qemu).
#
# Method: `rnncore bench --reps R` runs R+1 forward passes of T steps. With N(T, R) the instructions
# of a whole process, per step = [N(T2,2) - N(T2,1) - N(T1,2) + N(T1,1)] / (T2 - T1): the double
# difference cancels start-up, weight packing, the T-proportional input fill of the tool and each
# pass's fixed cost. The input projection runs in chunks of steps (src/plan.cpp: ~2 MiB of
# projections); T1 = that chunk and T2 = 2 chunks when the chunk is short, else T1 = 6, T2 = 18
# (one chunk, rows a multiple of 6), so the difference is whole chunks of the long-sequence case.
set -euo pipefail
OLD=${1:-4ef7988}
NEW=${2:-HEAD}
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel 2>/dev/null || pwd)
WORK=${WORK:-/tmp/rnncore-arm-counts}
NICE=${NICE:-19}
JOBS=${JOBS:-1}
ARCHES=(arm-linux-gnueabihf aarch64-linux-gnu)
# mode H B (input = hidden)
SHAPES=("lstm 256 1" "lstm 256 16" "lstm 256 64" "lstm 512 1" "lstm 512 16" "lstm 512 64" "gru 512 16" "rnn_tanh 512 16")
if [ -n "${ARM_SHAPES:-}" ]; then IFS=';' read -ra SHAPES <<<"$ARM_SHAPES"; fi  # e.g. "lstm 256 16;gru 512 16"
mkdir -p "$WORK/counts"

# The instruction-counting plugin (bench/qemu_insncount.c).
plugin=$WORK/libinsncount.so
if [ ! -f "$plugin" ]; then
  gcc -O2 -shared -fPIC -o "$plugin" "$REPO/bench/qemu_insncount.c"
fi

# Sources (git archive: the repository's work tree is not touched) and release builds of the tool.
build() {  # sha arch -> prints the tool's path
  local sha=$1 arch=$2 src=$WORK/src-$1 dir=$WORK/build-$1-$2
  if [ ! -d "$src" ]; then mkdir -p "$src.tmp" && git -C "$REPO" archive "$sha" | tar -x -C "$src.tmp" && mv "$src.tmp" "$src"; fi
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$src" --cross-file "$src/cross/$arch.ini" --buildtype=release -Dtests=false >"$dir.setup.log" 2>&1 ||
      { cat "$dir.setup.log" >&2; exit 1; }
  fi
  nice -n "$NICE" ninja -C "$dir" -j "$JOBS" tools/rnncore >&2
  echo "$dir/tools/rnncore"
}

qemu_of() { case $1 in aarch64*) qemu=(qemu-aarch64 -cpu cortex-a72);; *) qemu=(qemu-arm -cpu cortex-a15);; esac; }

count() {  # sha arch tool mode H B T R -> instructions of the whole process
  local f=$WORK/counts/$1-$2-$4-H$5-B$6-T$7-R$8
  if [ ! -s "$f" ]; then
    local qemu; qemu_of "$2"
    nice -n "$NICE" "${qemu[@]}" -L "/usr/$2" -plugin "$plugin,out=$f.tmp" \
      "$3" bench --mode "$4" --batch "$6" --input "$5" --hidden "$5" --seq "$7" --reps "$8" --threads 1 >"$f.log" 2>&1 ||
      { cat "$f.log" >&2; exit 1; }
    mv "$f.tmp" "$f"
  fi
  cat "$f"
}

old=$(git -C "$REPO" rev-parse --short=7 "$OLD")
new=$(git -C "$REPO" rev-parse --short=7 "$NEW")
declare -A tool
for sha in "$old" "$new"; do for arch in "${ARCHES[@]}"; do tool[$sha-$arch]=$(build "$sha" "$arch"); done; done

echo "Commits: old $old, new $new. $(qemu-aarch64 --version | head -1); $(aarch64-linux-gnu-g++ --version | head -1); $(arm-linux-gnueabihf-g++ --version | head -1)."
echo "qemu -cpu cortex-a15 (armv7, -march=armv7-a -mfpu=neon-vfpv4 -mthumb) / cortex-a72 (aarch64); --threads 1; guest instructions, not cycles."
echo
echo "| arch | shape | T1, T2 | $old kernel | $new kernel | $old instr/step | $new instr/step | new/old | $old instr/MAC | $new instr/MAC |"
echo "|---|---|---|---|---|---:|---:|---:|---:|---:|"
for arch in "${ARCHES[@]}"; do
  for shape in "${SHAPES[@]}"; do
    read -r mode H B <<<"$shape"
    case $mode in lstm) G=4;; gru) G=3;; *) G=1;; esac
    chunk=$((524288 / (B * G * H))); [ "$chunk" -lt 1 ] && chunk=1   # 2 MiB of f32 projections (H: a multiple of 16)
    if [ "$chunk" -ge 18 ]; then T1=6 T2=18; else T1=$chunk T2=$((2 * chunk)); fi
    macs=$((B * G * H * (H + H)))  # recurrent B·H·G·H + input B·I·G·H, I = H
    label=${arch%%-*}; [ "$label" = arm ] && label=armv7
    row="| $label | $mode H=$H B=$B | $T1, $T2"
    declare -A step kernel
    for sha in "$old" "$new"; do
      t=${tool[$sha-$arch]}
      n11=$(count "$sha" "$arch" "$t" "$mode" "$H" "$B" "$T1" 1); n12=$(count "$sha" "$arch" "$t" "$mode" "$H" "$B" "$T1" 2)
      n21=$(count "$sha" "$arch" "$t" "$mode" "$H" "$B" "$T2" 1); n22=$(count "$sha" "$arch" "$t" "$mode" "$H" "$B" "$T2" 2)
      step[$sha]=$(((n22 - n21 - n12 + n11) / (T2 - T1)))
      kernel[$sha]=$(grep -o 'kernel=[^ ]*' "$WORK/counts/$sha-$arch-$mode-H$H-B$B-T$T2-R2.log" | head -1 | cut -d= -f2)
    done
    row+=" | ${kernel[$old]} | ${kernel[$new]} | ${step[$old]} | ${step[$new]}"
    row+=$(awk -v o="${step[$old]}" -v n="${step[$new]}" -v m="$macs" 'BEGIN { printf " | %.3f | %.3f | %.3f |", n / o, o / m, n / m }')
    echo "$row"
  done
done
