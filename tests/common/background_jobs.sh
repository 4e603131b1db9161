# Sourced by the shell tests that start daemons (a tracker, runners): a private work
# folder in $work, and $pids, whose processes are killed, waited for and the folder
# removed when the script exits, however it exits.
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
