#!/usr/bin/env bash
# rpc/README.md's "Tune for a board", followed as written on one machine: the blocks
# marked <!-- board: ... --> run in order, with only what must differ here changed (the
# build host is `localhost` on a free port, the model a small one, the budget 16
# trials). The board is the slim runner built from a clean configure and installed
# (PREFIX), started twice: from its installed systemd unit's ExecStart, edited as the
# README says (tracker address, key, files), and by the README's own command line.
# Usage: tests/board_walkthrough/run.sh FULL_BUILD_DIR PREFIX
set -euo pipefail
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath "$1")
prefix=$(realpath "$2")
source "$source_dir/tests/common/background_jobs.sh"
fail() {
  echo "board walkthrough: $1" >&2
  for log in "$work"/*.log; do echo "--- $log:" >&2; tail -n 20 "$log" >&2; done
  exit 1
}

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
model="$source_dir/tests/frontend/models/tiny_cnn.onnx"
# One marked block of the README, with this machine's names.
block() {
  awk -v mark="<!-- board: $1 -->" '$0 == mark {found = 1; next} found && /^```sh$/ {inside = 1; next}
    inside && /^```$/ {exit} inside' "$source_dir/rpc/README.md" |
    sed -e "s/0\.0\.0\.0:9190/127.0.0.1:$port/g" -e "s/build-host:9190/localhost:$port/g" -e "s/build-host/localhost/g" \
      -e "s#m\.onnx#$model#g" -e "s/--trials 20000/--trials 16/g"
}
mkdir "$work/home" "$work/host" "$work/board"
run_env=(env -i HOME="$work/home" PATH="$build/cli:$prefix/bin:/usr/bin:/bin" LANG=C.UTF-8)

# The build host: tokens, certificates, the tracker (the block's last command, which
# serves until stopped, runs in the background).
block "build host" > "$work/host.sh"
[ "$(grep -c '^kiln tracker --listen' "$work/host.sh")" = 1 ] || fail "the build host's block has no tracker command"
sed -i '$ s/$/ > tracker.log 2>\&1 \&\necho $! > tracker.pid/' "$work/host.sh"
(cd "$work/host" && "${run_env[@]}" bash -euo pipefail "$work/host.sh") > "$work/host.log" 2>&1 ||
  fail "the build host's commands failed"
pids+=("$(cat "$work/host/tracker.pid")")
for _ in $(seq 100); do grep -q "listening on" "$work/host/tracker.log" 2>/dev/null && break; sleep 0.1; done
grep -q "a token per role required" "$work/host/tracker.log" || fail "the tracker did not start with a token per role"

# The board: what it is given (the runner's token, the CA), the installed service's
# command as the README says to edit it, and the README's own command.
cp "$work/host/runner.token" "$work/host/ca.crt" "$work/board/"
unit="$prefix/share/kiln/kiln-runner.service"
[ -f "$unit" ] || fail "no installed service unit at $unit"
exec_start=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$unit" | sed -e 's/^ExecStart=//' -e 's/\\$//' | tr -s ' \n' ' ')
exec_start=$(echo "$exec_start" | sed -e "s/build-host:9190/localhost:$port/" -e "s#/etc/kiln/#$work/board/#g" \
  -e "s#/var/cache/kiln-runner#$work/board/service-cache#")
case "$exec_start" in "$prefix/bin/kiln-runner "*) ;; *) fail "the unit does not start the installed runner: $exec_start" ;; esac
(cd "$work/board" && exec "${run_env[@]}" $exec_start) > "$work/service.log" 2>&1 &
pids+=($!)
block board > "$work/board.sh"
(cd "$work/board" && exec "${run_env[@]}" bash -euo pipefail "$work/board.sh") > "$work/board.log" 2>&1 &
pids+=($!)

# Back on the build host: the tuning job through the boards, then the tracker's status.
block tune > "$work/tune.sh"
(cd "$work/host" && "${run_env[@]}" bash -euo pipefail "$work/tune.sh") > "$work/tune.log" 2>&1 ||
  fail "the tuning job through the boards failed"
grep -q "jetson-orin" "$work/tune.log" || fail "kiln tracker status did not list the key"
[ "$(grep -c "idle\|busy" "$work/tune.log")" -ge 2 ] || fail "kiln tracker status did not list both runners"
"$build/cli/kiln" db stats --db "$work/host/kiln.db" > "$work/stats.log" 2>&1 || fail "no database"
grep -q "records:  *[1-9]" "$work/stats.log" || fail "the job stored no records"
echo "board walkthrough: rpc/README.md's steps ran as written (tracker with TLS and a token per role, the installed runner's service command and the README's, a tuning job through them)"
