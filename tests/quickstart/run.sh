#!/usr/bin/env bash
# The README's quick start, literally: the commands between its quickstart markers, run
# in a fresh folder with a fresh HOME (so `~/.local` is a new install prefix), on the
# build this test belongs to. Only `scripts/setup-deps && scripts/build` is left out:
# the packages are there and `build` is this build. Nothing else is changed: the
# installed `kiln` is the one on PATH, the C program finds libkiln_model through what
# pkg-config gives it (no LD_LIBRARY_PATH), Python imports the package pip installed.
# Usage: run.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$(cd "$1" && pwd) build_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/home" "$work/checkout"
cd "$work/checkout"
ln -s "$source_dir/tests" tests
ln -s "$source_dir/docs" docs
ln -s "$build_dir" build
ln -s "$source_dir/python" python  # pip builds the wheel elsewhere: the checkout stays as it is

awk '/^<!-- quickstart -->$/ {on = 1; next} /^<!-- \/quickstart -->$/ {on = 0} on && !/^```/' \
  "$source_dir/README.md" | grep -v '^scripts/setup-deps && scripts/build$' > "$work/quickstart.sh"
lines=$(grep -cv '^\(#.*\)\?$' "$work/quickstart.sh")
if [ "$lines" -lt 10 ]; then
  echo "the README's quick start has $lines commands: the markers or the extraction broke" >&2
  exit 1
fi
echo "running the README's quick start ($lines commands):"
env -i HOME="$work/home" PATH=/usr/bin:/bin LANG=C.UTF-8 bash -euxo pipefail "$work/quickstart.sh"

# What the walk must have left: the installed programs were the ones used, and every
# step's output is there.
test -x "$work/home/.local/bin/kiln"
readelf -d "$work/home/.local/lib/libkiln_model.so.1" | grep -q 'RUNPATH.*\$ORIGIN'
test -f kiln.db
test -f tiny_cnn.kiln/model.json
test -f my_dense.o && grep -q 'int32_t my_dense(void \*\*args);' my_dense.h
# Installing the Python package wrote nothing into the checkout.
test ! -e "$source_dir/python/build" && ! compgen -G "$source_dir/python/*.egg-info" > /dev/null

# The CMake package of the same install: a project that finds Kiln and links the C API.
mkdir "$work/consumer"
cat > "$work/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(Kiln 0.1 REQUIRED)
add_executable(run_model $source_dir/docs/examples/run_model.c)
target_link_libraries(run_model PRIVATE Kiln::kiln_model)
CMAKE
env -i HOME="$work/home" PATH=/usr/bin:/bin cmake -S "$work/consumer" -B "$work/consumer/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/home/.local" > /dev/null
env -i PATH=/usr/bin:/bin cmake --build "$work/consumer/build" > /dev/null
env -i PATH=/usr/bin:/bin "$work/consumer/build/run_model" tiny_cnn.kiln tests/frontend/models/tiny_cnn.input.bin
echo "quick start passed"
