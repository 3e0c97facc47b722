#!/usr/bin/env bash
# The second device call after the kit (bench/results/README.md, "GPU: the device kit"): where the
# time goes, for the next kernel work. Uses the same kit (build-kit/: rnncore) and writes to OUTDIR:
#   map.txt     `rnncore bench --backend gpu` for LSTM H = 512: the per-step kernel's tiles at B = 16
#               and 64 (RNNCORE_GPU_TILE=small|large|direct|lanes|lanes8; the training step small /
#               direct / lanes / lanes8), then
#               over batch, recurrence kernel
#               (RNNCORE_GPU_RECURRENCE=auto|persistent|tiled) and weights (f32; f16 on the matrix
#               units), T = 1 / 20 / 100 / 400 at B = 1 (the fixed and the per-step cost), and a long
#               run at B = 64 (whether short runs are slowed by clocks still rising)
#   ncu.txt     Nsight Compute, per kernel: duration, grid and block, registers, shared memory,
#               throughputs, occupancy, DRAM and L2 bytes, for the forwards above (T = 20) and one
#               training step; then the warp-state (stall) sections of the persistent kernel (its
#               timed launch: the second of two) and of a per-step kernel
#   cudnn.txt   PyTorch's profiler on nn.LSTM (cuDNN) for the same shapes: its kernels, calls and time
#   tiles.txt   (only when asked for) the per-step f32 kernel's tiles, small / large / direct / lanes /
#               lanes8, LSTM
#               and GRU, H = 512 / 1024 / 2048, B = 1 / 16 / 32 / 64, forward and training step
#   persist.txt (only when asked for) the persistent kernel against the per-step one over B = 4 to 32,
#               bf16 / f16 weight storage on the staged and direct per-step kernels, and training
#               steps (B = 1 / 4 / 16) with backward's persistent kernel against its per-step kernels
#   flashrnn.md (only when asked for) bench/gpu/flashrnn_compare.py: FlashRNN against rnncore on
#               FlashRNN's grid (LSTM B = 16, T = 1024, bf16, hidden 768 as 1x768 / 12x64 / 48x16 heads)
# Every part is time-boxed; the whole run ends inside RNNCORE_PROFILE_BUDGET_S (default 240 s).
# RNNCORE_PROFILE_PARTS (default map,ncu,cudnn; also tiles, persist, flashrnn) chooses the parts.
#
# usage: bench/gpu/device_profile.sh [--kit DIR] OUTDIR
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kit="$root/build-kit"
if [ "${1:-}" = "--kit" ]; then kit=$(cd "$2" && pwd); shift 2; fi
if [ $# -ne 1 ]; then echo "usage: bench/gpu/device_profile.sh [--kit DIR] OUTDIR" >&2; exit 2; fi
mkdir -p "$1" && out=$(cd "$1" && pwd)
rnn="$kit/rnncore"
[ -x "$rnn" ] || { echo "device_profile: $rnn is missing: run bench/gpu/prepare_kit.sh (and carry it)" >&2; exit 2; }
export PATH="$PATH:/usr/local/cuda/bin" PYTHONUNBUFFERED=1
start=$(date +%s)
deadline=$((start + ${RNNCORE_PROFILE_BUDGET_S:-240}))
left() { local l=$((deadline - $(date +%s))); echo $((l > 5 ? l : 5)); }
lim() { local l; l=$(left); echo $((l < $1 ? l : $1)); }
parts=",${RNNCORE_PROFILE_PARTS:-map,ncu,cudnn},"
want() { [[ $parts == *",$1,"* ]]; }

# ------------------------------------------------------------------------------------ the map
gpu_bench() {  # gpu_bench ENV... -- ARGS...: one `rnncore bench --backend gpu` line and its results
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "\$ ${envs[*]} rnncore bench $*"
  env "${envs[@]}" timeout "$(lim 30)" "$rnn" bench --backend gpu "$@" 2>&1 |
    grep -E "median_ms|kernel|error|gpu_graph" | head -n 4
}
bench() {  # bench ENV... -- ARGS...: gpu_bench of the map's shape, LSTM H = I = 512
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  gpu_bench "${envs[@]}" -- --mode lstm --input 512 --hidden 512 "$@"
}
want map && {
  echo "# rnncore bench --backend gpu, LSTM I = H = 512, median of --reps (ms for the whole sequence)"
  echo "# the per-step kernel's tiles first (RNNCORE_GPU_TILE: small and large stage k chunks in shared memory,"
  echo "# direct reads h and R through L1 with eight warps a block, lanes / lanes8 with 32 / 8 lanes splitting"
  echo "# a task's k; auto picks direct on NVIDIA)"
  for b in 16 64; do
    for t in small large direct lanes lanes8; do bench RNNCORE_GPU_RECURRENCE=tiled RNNCORE_GPU_TILE=$t -- --dtype f32 --batch $b --seq 100 --reps 20; done
  done
  for t in small direct lanes lanes8; do bench RNNCORE_GPU_TILE=$t -- --dtype f32 --batch 64 --seq 100 --reps 10 --backward; done
  for w in "--dtype f32" "--dtype f16 --gpu-half-math"; do
    for b in 1 16 64; do
      for r in auto persistent tiled; do
        bench RNNCORE_GPU_RECURRENCE=$r -- $w --batch $b --seq 100 --reps 20
      done
    done
  done
  for t in 1 20 400; do bench RNNCORE_GPU_RECURRENCE=auto -- --dtype f32 --batch 1 --seq $t --reps 20; done
  bench RNNCORE_GPU_RECURRENCE=auto -- --dtype f32 --batch 64 --seq 100 --reps 200
  bench RNNCORE_GPU_RECURRENCE=auto -- --dtype f32 --batch 64 --seq 100 --reps 20 --backward
} >"$out/map.txt" 2>&1; want map && echo "device_profile: map.txt ($(($(date +%s) - start)) s)"

# ------------------------------------------------------------------------------------ tiles
# (not a default part) the per-step f32 kernel's tiles over cells and shapes, with auto's recurrence
# (where the persistent kernel runs the batch, the three lines agree): forward and training step
tiles() {  # tiles MODE H B TILE
  gpu_bench RNNCORE_GPU_TILE="$4" -- --dtype f32 --mode "$1" --input "$2" --hidden "$2" --batch "$3" --seq 50 --reps 5 --backward
}
want tiles && {
  echo "# rnncore bench --backend gpu, f32, T = 50: RNNCORE_GPU_TILE small / large (staged) against direct, lanes, lanes8"
  for m in lstm gru; do
    for h in 512 1024 2048; do
      for b in 1 16 32 64; do
        for t in small large direct lanes lanes8; do
          if [ "$t" = large ] && [ "$b" -lt 32 ]; then continue; fi  # (auto's large needs blocks for every SM)
          tiles $m $h $b $t
        done
      done
    done
  done
} >"$out/tiles.txt" 2>&1; want tiles && echo "device_profile: tiles.txt ($(($(date +%s) - start)) s)"
# (not a default part) where the persistent kernel stops paying: persistent against the per-step
# kernel auto picks, over batch; then 16-bit weight storage on the per-step kernels; then training
# steps with backward's persistent kernel against its per-step kernels
recur() {  # recur RECURRENCE TILE MODE H B DTYPE [more bench options]
  gpu_bench RNNCORE_GPU_RECURRENCE="$1" RNNCORE_GPU_TILE="$2" -- --dtype "$6" --mode "$3" --input "$4" --hidden "$4" \
    --batch "$5" --seq 50 --reps 10 "${@:7}"
}
want persist && {
  echo "# rnncore bench --backend gpu, T = 50: RNNCORE_GPU_RECURRENCE persistent against tiled (auto's tile)"
  for m in lstm gru; do
    for h in 512 1024 2048; do
      for b in 4 8 16 32; do
        for r in persistent tiled; do recur $r auto $m $h $b f32; done
      done
    done
  done
  for w in bf16 f16; do
    for b in 32 64; do
      for t in small direct; do recur tiled $t lstm 1024 $b $w; done
    done
  done
  # training steps: backward's persistent kernel (f32_<cell>_grad_persistent, forced persistent
  # only) against the per-step cell kernel and products (tiled, auto's tile: direct on NVIDIA)
  for m in lstm gru; do
    for h in 512 1024; do
      for b in 1 4 16; do
        for r in persistent tiled; do recur $r auto $m $h $b f32 --backward; done
      done
    done
  done
} >"$out/persist.txt" 2>&1; want persist && echo "device_profile: persist.txt ($(($(date +%s) - start)) s)"

# ------------------------------------------------------------------------------------ ncu
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
metrics=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
metrics=$metrics,launch__shared_mem_per_block_dynamic,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
metrics=$metrics,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,lts__t_bytes.sum
prof() {  # prof TITLE ENV... -- ARGS...
  local title=$1 envs=()
  shift
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo; echo "## $title"; echo "\$ ${envs[*]} ncu ... rnncore bench $*"
  env "${envs[@]}" timeout "$(lim 40)" "$ncu" --clock-control none --print-summary per-kernel --metrics "$metrics" \
    "$rnn" bench --backend gpu --mode lstm --input 512 --hidden 512 --reps 1 "$@" 2>&1 | grep -v "^==PROF==" | tail -n 120
}
want ncu && {
  if [ -z "$ncu" ]; then
    echo "ncu not found"
  else
    "$ncu" --version
    prof "f32 B=1 auto (persistent)" RNNCORE_GPU_RECURRENCE=auto -- --dtype f32 --batch 1 --seq 20
    prof "f32 B=16 auto" RNNCORE_GPU_RECURRENCE=auto -- --dtype f32 --batch 16 --seq 20
    prof "f32 B=64 small tile (per step)" RNNCORE_GPU_RECURRENCE=auto RNNCORE_GPU_TILE=small -- --dtype f32 --batch 64 --seq 20
    prof "f32 B=64 auto: the direct tile (per step)" RNNCORE_GPU_RECURRENCE=auto -- --dtype f32 --batch 64 --seq 20
    prof "f16 half math B=16 auto" RNNCORE_GPU_RECURRENCE=auto -- --dtype f16 --gpu-half-math --batch 16 --seq 20
    prof "f16 half math B=64 auto" RNNCORE_GPU_RECURRENCE=auto -- --dtype f16 --gpu-half-math --batch 64 --seq 20
    prof "f32 B=64 training step" RNNCORE_GPU_RECURRENCE=auto -- --dtype f32 --batch 64 --seq 10 --backward
    for k in "recurrence_persistent:--batch 1" "step_tiled:--batch 64" "step_direct:--batch 64" "step_lanes:--batch 64" \
      "step_lanes8:--batch 64"; do
      echo; echo "## warp states: kernels matching ${k%%:*}, ${k#*:}"
      tile=direct; [ "${k%%:*}" = step_tiled ] && tile=small
      [ "${k%%:*}" = step_lanes ] && tile=lanes; [ "${k%%:*}" = step_lanes8 ] && tile=lanes8
      # (the direct step also gets its memory tables: L1 wavefronts and sectors per request, whether
      # its L1 stalls are the loads' latency or L1's throughput)
      sections=(--section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy)
      [ "${k%%:*}" != step_tiled ] && [ "${k%%:*}" != recurrence_persistent ] &&
        sections+=(--section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables)
      RNNCORE_GPU_TILE=$tile timeout "$(lim 40)" "$ncu" --clock-control none --kernel-name-base demangled -k "regex:${k%%:*}" --launch-skip 1 --launch-count 1 \
        "${sections[@]}" "$rnn" bench --backend gpu --mode lstm --input 512 --hidden 512 --reps 1 --seq 20 --dtype f32 ${k#*:} 2>&1 |
        grep -v "^==PROF==" | tail -n 160
    done
  fi
} >"$out/ncu.txt" 2>&1; want ncu && echo "device_profile: ncu.txt ($(($(date +%s) - start)) s)"

# ------------------------------------------------------------------------------------ cuDNN
want cudnn && timeout "$(lim 60)" python3 - >"$out/cudnn.txt" 2>&1 <<'EOF'
import torch
from torch.profiler import profile, ProfilerActivity
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name(0))
for dtype in (torch.float32, torch.float16):
    for B in (1, 16, 64):
        rnn = torch.nn.LSTM(512, 512).to(device="cuda", dtype=dtype)
        x = torch.randn(100, B, 512, device="cuda", dtype=dtype)
        with torch.no_grad():
            for _ in range(5):
                rnn(x)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                for _ in range(10):
                    rnn(x)
                torch.cuda.synchronize()
        print(f"\n## nn.LSTM 512, T=100, B={B}, {dtype}: 10 forwards")
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=90))
EOF
want cudnn && echo "device_profile: cudnn.txt ($(($(date +%s) - start)) s)"

# ------------------------------------------------------------------------------------ FlashRNN
# (not a default part) FlashRNN's fused, alternating and Triton kernels on its own grid against
# rnncore's dense point (bench/gpu/flashrnn_compare.py: flashrnn.md, flashrnn.csv; FlashRNN from the
# kit's wheels/, its CUDA kernels compiled here on first use: minutes)
want flashrnn && {
  budget=$(lim 420)
  timeout "$budget" python3 "$root/bench/gpu/flashrnn_compare.py" --kit "$kit" --out "$out" --budget-s $((budget - 30)) \
    --heads 1x768,12x64 --backends cuda_fused,triton_fused \
    --case-timeout 150 >"$out/flashrnn.log" 2>&1
  echo "device_profile: flashrnn.md, exit $? ($(($(date +%s) - start)) s)"
}
echo "device_profile: total $(($(date +%s) - start)) s; files: $(ls "$out" | tr '\n' ' ')"
