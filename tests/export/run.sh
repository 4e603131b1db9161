#!/usr/bin/env bash
# kiln export end to end: tune a dense layer, export its best record with the command
# and with the C API, link each object into use_dense.c and compare with a plain loop.
# Usage: run.sh KILN KILN_EXPORT_CAPI RUNTIME_DIR CC
set -euo pipefail
kiln=$1 capi=$2 runtime_dir=$3 cc=$4
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shapes="--op dense --shape 64x128 --shape 96x128 --constant 1"
"$kiln" tune-op $shapes --trials 24 --batch 8 --repeat 2 --min-repeat-ms 1 --confirm-top 0 -q --db "$work/d.db"
key=$("$kiln" show $shapes --key | sed -n 's/^key: //p')

link_and_run() {  # DIR: holds kiln_test_dense.o and .h
  "$cc" -std=c99 -Wall -Wextra -pedantic -Werror -I"$1" "$here/use_dense.c" "$1/kiln_test_dense.o" \
    -L"$runtime_dir" -lkiln_runtime -Wl,-rpath,"$runtime_dir" -lm -o "$1/use_dense"
  "$1/use_dense"
}

mkdir "$work/cli" "$work/capi"
"$kiln" export --db "$work/d.db" --workload "$key" --name kiln_test_dense -o "$work/cli/kiln_test_dense.o"
link_and_run "$work/cli"
"$capi" "$work/d.db" "$key" "$work/capi"
link_and_run "$work/capi"
# Unknown workloads exit 2, like kiln db best.
status=0
"$kiln" export --db "$work/d.db" --workload 0000000000000000000000000000000000000000000000000000000000000000 \
  -o "$work/x.o" 2>"$work/err" || status=$?
grep -q "holds no record of workload" "$work/err"
[ "$status" -eq 2 ] && [ ! -e "$work/x.o" ] && [ ! -e "$work/x.h" ]
# Names a header or a program cannot take: a keyword (the header would not compile), a
# C library function (the kernel would shadow it), a reserved name. Refused, nothing written.
for name in int memcpy __kernel _Kernel 9lives; do
  status=0
  "$kiln" export --db "$work/d.db" --workload "$key" --name "$name" -o "$work/bad.o" 2>"$work/err" || status=$?
  [ "$status" -ne 0 ] && [ ! -e "$work/bad.o" ] && [ ! -e "$work/bad.h" ] || { cat "$work/err"; exit 1; }
  grep -q "cannot name the kernel '$name'" "$work/err" || { cat "$work/err"; exit 1; }
done
grep -q "the C library has a function" <("$kiln" export --db "$work/d.db" --workload "$key" --name memcpy \
  -o "$work/bad.o" 2>&1 || true)
echo "export test passed"
