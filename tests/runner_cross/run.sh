#!/usr/bin/env bash
# The slim runner cross-compiled for AArch64, run as a board would run it: under
# qemu-aarch64, serving a tracker, measuring a tuning job the tuner cross-compiled.
# Usage: tests/runner_cross/run.sh FULL_BUILD_DIR AARCH64_PREFIX
# (FULL_BUILD_DIR has `kiln`; AARCH64_PREFIX is where the cross build was installed.)
set -euo pipefail
build=$(realpath "$1")
prefix=$(realpath "$2")
kiln="$build/cli/kiln"
source "$(dirname "$0")/../common/background_jobs.sh"

file -L "$prefix/bin/kiln-runner" | grep -q "ARM aarch64" || { echo "not an AArch64 kiln-runner: $prefix/bin/kiln-runner"; exit 1; }

"$kiln" tracker --listen 127.0.0.1:0 --port-file "$work/port" > "$work/tracker.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
address="127.0.0.1:$(cat "$work/port")"

# The board: its own kiln-runner and kiln-measure-server, both AArch64. qemu-user does
# not follow exec, so the runner starts its measurement server through the wrapper.
qemu-aarch64 "$prefix/bin/kiln-runner" --tracker "$address" --key arm --runner-id board \
  --cache-dir "$work/cache" --target "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72" \
  --exec-wrapper qemu-aarch64 --measure-server "$prefix/bin/kiln-measure-server" --run-timeout 120 \
  > "$work/runner.log" 2>&1 &
runner=$!
pids+=($runner)
for _ in $(seq 300); do
  kill -0 "$runner" 2>/dev/null || break
  "$kiln" tracker status --tracker "$address" 2>/dev/null | grep -q "board" && break
  sleep 0.2
done
"$kiln" tracker status --tracker "$address" | grep "board" | grep -q "aarch64" || {
  echo "the AArch64 runner did not register with its target"; cat "$work/runner.log"; exit 1; }

if ! "$kiln" tune-op --op matmul --shape 16x24 --shape 24x8 --trials 8 --batch 8 \
    --runner "tracker://$address/arm" --db "$work/arm.db" --repeat 1 --min-repeat-ms 0 --confirm-top 0 -q \
    > "$work/tune.log" 2>&1; then
  echo "tuning through the AArch64 runner failed:"; cat "$work/tune.log"; echo "--- runner:"; cat "$work/runner.log"
  exit 1
fi
"$kiln" db stats --db "$work/arm.db" | tee "$work/stats.log" | grep -q "8 records, 8 successful" || {
  echo "expected 8 successful records:"; cat "$work/stats.log"; cat "$work/runner.log"; exit 1; }
echo "cross-compiled runner: AArch64 kiln-runner under qemu measured 8 of 8 candidates"
