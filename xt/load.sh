#!/usr/bin/env bash
# Runs a command beside a mixed load, as on a busy shared build host: CPU
# workers, memory workers that map, touch and free memory, workers that
# fork and reap, and workers that mmap and unmap files (Debian's stress-ng).
# A test whose verdict changes under this load depends on the machine's
# speed, which is a defect of the test. The load is started before the
# command and stopped after it; exits with the command's status.
#
#   bash xt/load.sh prove -b t/07-window.t
#   LOAD='--cpu 8' bash xt/load.sh prove -b t/07-window.t   # CPU hogs only
#
# Default: stress-ng --cpu 4 --vm 2 --vm-bytes 1G --fork 2 --mmap 1, at
# nice 0 (as another user's work would run). Without stress-ng, one shell
# busy loop per core (CPU only, a weaker load): install stress-ng.
set -uo pipefail

if [ $# -eq 0 ]; then
  echo "usage: xt/load.sh COMMAND [ARGS...]" >&2
  exit 2
fi

read -r -a load <<<"${LOAD:---cpu 4 --vm 2 --vm-bytes 1G --fork 2 --mmap 1}"
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

if command -v stress-ng >/dev/null; then
  echo "xt/load.sh: stress-ng ${load[*]}" >&2
  # --timeout: a load left behind by a killed script ends by itself.
  stress-ng "${load[@]}" --timeout 3600 --quiet &
  pids+=($!)
else
  echo "xt/load.sh: stress-ng is not installed; CPU busy loops only" >&2
  for _ in $(seq 1 "$(nproc)"); do
    (while :; do :; done) &
    pids+=($!)
  done
fi

"$@"
status=$?
stop
exit $status
