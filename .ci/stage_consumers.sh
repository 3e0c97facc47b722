#!/usr/bin/env bash
# CI stage: rnncore as other projects use it (docs/integration.md). Installs the libraries into a
# temporary prefix (meson setup --prefix, meson install), then
#   (a) builds the user guide's C example (docs/guide.md) with gcc through `pkg-config --cflags --libs rnncore`, runs it;
#   (b) the same for the C++ example with g++;
#   (c) builds tests/consumers/cmake/run_model.cpp with g++ through `pkg-config rnncore_io`, runs it
#       (it loads the bundled PyTorch LSTM with rnncore::io and compares with PyTorch's output);
#   (d) configures and builds the CMake project tests/consumers/cmake (find_package(rnncore),
#       rnncore::io and rnncore::rnncore; the C example linked as C), runs both programs;
#   (e) builds a Meson parent project (debug build type) that takes rnncore as a subproject, runs its
#       program, and checks that no rnncore test, tool or benchmark is part of it and that the
#       library was still compiled with -O3;
#   (f) configures the same parent with -Drnncore:tests=true and checks that the tests come back.
# Each of (a)–(f) counts as one check; the install counts as one too. Ends with
# "STAGE_RESULT passed=N failed=M".
#
# Locally: bash .ci/stage_consumers.sh   (work directory: $RNNCORE_CONSUMERS_DIR, default a new /tmp dir)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "consumers: ok: $*"; }
bad() { failed=$((failed + 1)); echo "consumers: FAILED: $*"; }
log() { printf '\n=== consumers: %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
log "installing the build dependencies and cmake"
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends \
         g++ meson ninja-build pkg-config libxsimd-dev doctest-dev nlohmann-json3-dev libcli11-dev cmake >/dev/null; }; then
  bad "apt-get install"
fi

if [ -n "${RNNCORE_CONSUMERS_DIR:-}" ]; then
  work=$RNNCORE_CONSUMERS_DIR
  rm -rf "$work" && mkdir -p "$work"
else
  work=$(mktemp -d /tmp/rnncore-consumers.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
prefix=$work/prefix
models=$root/examples/models

# ---- install: the libraries only (the consumers bring their own programs) ----
log "meson setup --prefix $prefix, compile, install"
t0=$(date +%s)
installed=false
# The build directory sits beside the release stage's build/ (ignored by git), so that the compiler
# sees the same relative paths and flags and .ci/run's compiler cache serves the library's objects.
cbuild=$root/build-consumers
rm -rf "$cbuild"
if meson setup "$cbuild" --prefix="$prefix" -Dtests=false -Dtools=false -Dbenchmarks=disabled \
     >"$work/setup.log" 2>&1 &&
   meson compile -C "$cbuild" && meson install -C "$cbuild" --quiet; then
  pc=$(find "$prefix" -name rnncore.pc | head -n 1)
  cmake_config=$(find "$prefix" -name rnncoreConfig.cmake | head -n 1)
  if [ -n "$pc" ] && [ -n "$cmake_config" ] && [ -f "$(dirname "$cmake_config")/rnncoreConfigVersion.cmake" ]; then
    installed=true
    ok "install into $prefix ($(($(date +%s) - t0)) s): ${pc#"$prefix"/}, ${cmake_config#"$prefix"/}"
  else
    bad "install: rnncore.pc or the CMake package files missing under $prefix"
    find "$prefix" -type f | sed "s|^$prefix/|  |"
  fi
else
  cat "$work/setup.log"
  bad "configure, build or install of the libraries"
fi

if $installed; then
  export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  echo "pkg-config --cflags --libs rnncore:    $(pkg-config --cflags --libs rnncore)"
  echo "pkg-config --cflags --libs rnncore_io: $(pkg-config --cflags --libs rnncore_io)"
  echo "pkg-config --static --libs rnncore_io: $(pkg-config --static --libs rnncore_io)"

  # ---- (a), (b): the user guide's examples through pkg-config, exactly as a user types them ----
  log "(a) gcc examples/hello_lstm.c \$(pkg-config --cflags --libs rnncore)"
  if gcc examples/hello_lstm.c $(pkg-config --cflags --libs rnncore) -o "$work/hello_c" && "$work/hello_c"; then
    ok "C example: gcc + pkg-config rnncore"
  else
    bad "C example: gcc + pkg-config rnncore"
  fi
  log "(b) g++ examples/hello_lstm.cpp \$(pkg-config --cflags --libs rnncore)"
  if g++ examples/hello_lstm.cpp $(pkg-config --cflags --libs rnncore) -o "$work/hello_cpp" && "$work/hello_cpp"; then
    ok "C++ example: g++ + pkg-config rnncore"
  else
    bad "C++ example: g++ + pkg-config rnncore"
  fi

  # ---- (c): the I/O library through pkg-config ----
  log "(c) g++ tests/consumers/cmake/run_model.cpp \$(pkg-config --cflags --libs rnncore_io)"
  if g++ -std=c++17 -O2 -DRNNCORE_MODELS_DIR="\"$models\"" tests/consumers/cmake/run_model.cpp \
       $(pkg-config --cflags --libs rnncore_io) -o "$work/run_model_pc" && "$work/run_model_pc"; then
    ok "model loading: g++ + pkg-config rnncore_io, output within tolerance of PyTorch's"
  else
    bad "model loading: g++ + pkg-config rnncore_io"
  fi

  # ---- (d): CMake, find_package(rnncore) ----
  log "(d) CMake project tests/consumers/cmake: find_package(rnncore), rnncore::io, rnncore::rnncore"
  if cmake -S tests/consumers/cmake -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DRNNCORE_SOURCE_DIR="$root" \
       -DCMAKE_BUILD_TYPE=Release &&
     cmake --build "$work/cmake" --verbose && "$work/cmake/run_model" && "$work/cmake/hello_c"; then
    ok "CMake consumer: run_model (rnncore::io) within tolerance of PyTorch's, hello_c (C, rnncore::rnncore)"
  else
    bad "CMake consumer (configure, build or run)"
  fi
fi

# ---- (e), (f): Meson subproject ----
parent=$work/parent
mkdir -p "$parent/subprojects"
ln -s "$root" "$parent/subprojects/rnncore"
cat >"$parent/meson.build" <<EOF
# A project that builds rnncore as its subproject (subprojects/rnncore: a link to the source tree),
# in a debug build: rnncore's own tests, tools and benchmarks must stay out of it.
project('rnncore_parent', 'c', 'cpp', default_options: ['buildtype=debug', 'cpp_std=c++17'])
rnncore_dep = dependency('rnncore', fallback: ['rnncore', 'rnncore_dep'])
rnncore_io_dep = dependency('rnncore_io', fallback: ['rnncore', 'rnncore_io_dep'])
executable('hello_c', '$root/examples/hello_lstm.c', dependencies: rnncore_dep, link_language: 'cpp')
run_model = executable('run_model', '$root/tests/consumers/cmake/run_model.cpp',
  cpp_args: ['-DRNNCORE_MODELS_DIR="$models"'], dependencies: rnncore_io_dep)
test('parent_run_model', run_model)
EOF

log "(e) Meson parent project with rnncore as a subproject (buildtype=debug)"
# PKG_CONFIG_PATH is cleared so that the installed copy cannot stand in for the subproject.
if PKG_CONFIG_PATH= meson setup "$parent/build" "$parent" --wrap-mode=forcefallback >"$work/parent-setup.log" 2>&1 &&
   meson compile -C "$parent/build" && "$parent/build/hello_c" >/dev/null &&
   meson test -C "$parent/build" --print-errorlogs; then
  tests=$(meson introspect "$parent/build" --tests |
          python3 -c 'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)))')
  extra=$(meson introspect "$parent/build" --targets |
          python3 -c 'import json, sys; print(" ".join(t["name"] for t in json.load(sys.stdin)
                      if t["subproject"] == "rnncore" and t["type"] != "static library"))')
  # The library's own units are compiled with -O3 although the parent builds -O0.
  plan_flags=$(python3 -c 'import json, sys
for c in json.load(open(sys.argv[1])):
    if c["file"].endswith("src/plan.cpp"):
        print(" ".join(a for a in c["command"].split() if a.startswith("-O")))' "$parent/build/compile_commands.json")
  echo "tests: $tests; rnncore targets other than its libraries: ${extra:-none}; src/plan.cpp: $plan_flags"
  if [ "$tests" = "parent_run_model" ] && [ -z "$extra" ] && [ "${plan_flags##* }" = "-O3" ]; then
    ok "Meson subproject: the parent builds and runs; no rnncore test, tool or benchmark; library at -O3"
  else
    bad "Meson subproject: expected only the parent's test, no rnncore targets but its libraries, -O3 last"
  fi
else
  cat "$work/parent-setup.log"
  bad "Meson subproject: configure, build or run of the parent"
fi

log "(f) the same parent with -Drnncore:tests=true (configure only)"
if PKG_CONFIG_PATH= meson setup "$parent/build-tests" "$parent" --wrap-mode=forcefallback -Drnncore:tests=true \
     >"$work/parent-tests-setup.log" 2>&1; then
  n=$(meson introspect "$parent/build-tests" --tests | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')
  if [ "$n" -gt 1 ]; then
    ok "Meson subproject: -Drnncore:tests=true registers rnncore's tests ($n tests in the parent in all)"
  else
    bad "Meson subproject: -Drnncore:tests=true registered $n test(s)"
  fi
else
  cat "$work/parent-tests-setup.log"
  bad "Meson subproject: configure with -Drnncore:tests=true"
fi

echo "consumers: wall time $(($(date +%s) - start)) s"
echo "STAGE_RESULT passed=$passed failed=$failed"
[ "$failed" -eq 0 ]
