#!/usr/bin/env bash
# Builds bench/onednn_compare (rnncore against oneDNN, see docs/performance.md), runs it and keeps
# the table as text, Markdown and CSV.
#
# usage: scripts/bench_onednn.sh [--update-docs] [onednn_compare options, e.g. --quick or --reps 9]
#
#   --update-docs   replace the measured part of docs/performance.md (between the markers
#                   <!-- onednn_compare:begin --> and <!-- onednn_compare:end -->) with this run's
#                   Markdown; the prose around it is yours to update.
#
# environment: BUILD_DIR (default /tmp/rnncore-bench-onednn), OUT_DIR (default $BUILD_DIR/results),
#              RNNCORE_COMMIT (the commit to record; default: git rev-parse HEAD of this tree).
# The full sweep takes about 10-20 minutes on 2 cores; progress goes to stderr.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-/tmp/rnncore-bench-onednn}
out=${OUT_DIR:-$build/results}
update_docs=0
if [[ ${1:-} == --update-docs ]]; then
  update_docs=1
  shift
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

if [[ $update_docs == 1 ]]; then
  doc=$src/docs/performance.md
  grep -q '<!-- onednn_compare:begin -->' "$doc" && grep -q '<!-- onednn_compare:end -->' "$doc" ||
    { echo "bench_onednn.sh: $doc lacks the onednn_compare markers" >&2; exit 1; }
  awk -v table="$out/onednn_compare.md" '
    /<!-- onednn_compare:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
    /<!-- onednn_compare:end -->/ { skip = 0 }
    !skip { print }
  ' "$doc" >"$doc.tmp" && mv "$doc.tmp" "$doc"
  echo "updated: $doc" >&2
fi
exit "$status"
