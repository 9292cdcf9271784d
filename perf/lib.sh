# perf/lib.sh — what the perf/run_*.sh scripts that start servers share; `source perf/lib.sh`
# after their `cd` to the repository's root.
#   stop_pid PID   SIGTERM to PID, up to 15 s for it to exit, then SIGKILL; reaps it. Quiet, and
#                  a no-op for a PID that is gone.
#   ticks PID...   CPU time (user + system, /proc/PID/stat) of the processes, in clock ticks
#                  (getconf CLK_TCK a second); a process that is gone counts 0.
#   cpu_s PID...   the same in seconds.
stop_pid() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 150); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
ticks() {
  local t=0 p
  for p in "$@"; do
    t=$((t + $(awk '{printf "%.0f\n", $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
cpu_s() { python3 -c "print($(ticks "$@") / $(getconf CLK_TCK))"; }
