#!/usr/bin/env bash
# Runs a command with a CPU hog on every core, as on a busy build host or
# CI runner: one busy loop per core (nproc, or HOGS=N), started before the
# command and killed after it. Exits with the command's status.
#
#   bash xt/hogs.sh prove -b t/07-window.t
#   HOGS=4 bash xt/hogs.sh make test
set -uo pipefail

if [ $# -eq 0 ]; then
  echo "usage: xt/hogs.sh COMMAND [ARGS...]" >&2
  exit 2
fi

n=${HOGS:-$(nproc)}
pids=()
stop() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null
    wait "${pids[@]}" 2>/dev/null
  fi
  pids=()
}
trap stop EXIT
trap 'stop; exit 130' INT TERM

for _ in $(seq 1 "$n"); do
  # A busy loop of the shell itself: no child processes to leak.
  (while :; do :; done) &
  pids+=($!)
done

"$@"
status=$?
stop
exit $status
