#!/usr/bin/env bash
# Builds bench/onednn_compare (rnncore against oneDNN, see docs/performance.md), runs it and keeps
# the table as text, Markdown and CSV.
#
# usage: scripts/bench_onednn.sh [--log NAME] [onednn_compare options, e.g. --quick or --reps 9]
#
#   --log NAME      also keep this run's Markdown as a dated raw log,
#                   bench/results/onednn_NAME_YYYY-MM-DD.md (NAME: what and where, e.g. f32_amd_epyc_avx512);
#                   the summary in docs/performance.md and bench/results/README.md are yours to update.
#
# environment: BUILD_DIR (default /tmp/rnncore-bench-onednn), OUT_DIR (default $BUILD_DIR/results),
#              RNNCORE_COMMIT (the commit to record; default: git rev-parse HEAD of this tree).
# The full sweep takes about 10-20 minutes on 2 cores; progress goes to stderr.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-/tmp/rnncore-bench-onednn}
out=${OUT_DIR:-$build/results}
log_name=""
if [[ ${1:-} == --log ]]; then
  log_name=${2:?--log needs a name, e.g. f32_amd_epyc_avx512}
  shift 2
fi

if [[ -f $build/build.ninja ]]; then
  meson configure "$build" -Dbenchmarks=enabled >/dev/null
else
  meson setup "$build" "$src" -Dbenchmarks=enabled -Dtests=false -Dbuildtype=release >/dev/null
fi
ninja -C "$build" bench/onednn_compare >/dev/null

# The commit measured (RNNCORE_COMMIT overrides it, e.g. for a tree exported with git archive).
commit=${RNNCORE_COMMIT:-$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)}
state=""
if [[ -z ${RNNCORE_COMMIT:-} && $commit != unknown ]] && ! git -C "$src" diff-index --quiet HEAD -- 2>/dev/null; then
  state=" (with uncommitted changes)"
fi

mkdir -p "$out"
"$build/bench/onednn_compare" "$@" \
  --note "rnncore commit ${commit}${state}; reproduce: scripts/bench_onednn.sh${*:+ $*}" \
  --markdown "$out/onednn_compare.md" --csv "$out/onednn_compare.csv" | tee "$out/onednn_compare.txt"
status=${PIPESTATUS[0]}
echo "results: $out/onednn_compare.{txt,md,csv}" >&2

if [[ -n $log_name ]]; then
  log=$src/bench/results/onednn_${log_name}_$(date -u +%F).md
  cp "$out/onednn_compare.md" "$log"
  echo "raw log: $log" >&2
fi
exit "$status"
