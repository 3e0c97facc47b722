#!/usr/bin/env bash
# CI stage: the suites that run on several threads, under ThreadSanitizer. Their results are checked
# bit for bit against one thread (tests/test_train*.cpp, tests/test_threads.cpp), which a race can
# pass by luck; TSan sees the race itself. First a positive control: a two-thread increment of a
# plain int must be reported, or the stage fails (a sanitizer that is not there checks nothing).
# One SIMD kernel file (AVX2 where the machine has it), -O1 -g, as the ASan stage.
# Ends with "STAGE_RESULT passed=N failed=M".
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "stage_tsan: ok: $*"; }
bad() { failed=$((failed + 1)); echo "stage_tsan: FAILED: $*"; }

work=$(mktemp -d /tmp/rnncore-tsan.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TSAN_OPTIONS="halt_on_error=1:exitcode=66"

echo "=== positive control: a data race TSan must report"
cat >"$work/race.cpp" <<'EOF'
#include <thread>
int counter = 0;
int main() {
  std::thread a([] { for (int i = 0; i < 100000; ++i) ++counter; });
  std::thread b([] { for (int i = 0; i < 100000; ++i) ++counter; });
  a.join();
  b.join();
  return counter == -1;
}
EOF
if c++ -std=c++17 -g -O1 -fsanitize=thread "$work/race.cpp" -o "$work/race" -pthread; then
  "$work/race" >"$work/race.log" 2>&1
  rc=$?
  if [ "$rc" -eq 66 ] && grep -q "WARNING: ThreadSanitizer: data race" "$work/race.log"; then
    ok "the control's race was reported"
  else
    cat "$work/race.log"
    bad "the control's race was not reported (exit $rc): ThreadSanitizer is not working here"
  fi
else
  bad "the positive control did not build with -fsanitize=thread"
fi

simd=()
[ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && simd=(-Dsimd=avx2)
opts=("${simd[@]+"${simd[@]}"}" -Doptimization=1 -Ddebug=true -Db_sanitize=thread -Db_lundef=false)
tests=(train train_lstm_ext threads)
echo "=== build-tsan: ${tests[*]}"
if { meson setup build-tsan --wipe "${opts[@]}" >/dev/null 2>&1 || meson setup build-tsan "${opts[@]}"; } &&
   CCACHE_NOHASHDIR=true meson compile -C build-tsan tests/test_train tests/test_train_lstm_ext tests/test_threads; then
  for t in "${tests[@]}"; do
    if meson test -C build-tsan --no-rebuild --print-errorlogs --timeout-multiplier 6 "$t"; then
      ok "$t: no race"
    else
      bad "$t under ThreadSanitizer (log above)"
    fi
  done
else
  bad "build-tsan"
fi
echo "STAGE_RESULT passed=$passed failed=$failed"
