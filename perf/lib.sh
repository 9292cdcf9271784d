# perf/lib.sh — what the perf/run_*.sh scripts that start servers share; `source perf/lib.sh`
# after their `cd` to the repository's root.
#   stop_pid PID   SIGTERM to PID, up to 15 s for it to exit, then SIGKILL; reaps it. Quiet, and
#                  a no-op for a PID that is gone.
#   ticks PID...   CPU time (user + system, /proc/PID/stat) of the processes, in clock ticks
#                  (getconf CLK_TCK a second); a process that is gone counts 0.
#   cpu_s PID...   the same in seconds.
#   children_s     sets CHILDREN_S to the CPU time (user + system) of this shell's children that
#                  have ended (bash's `times`), in seconds: around a client (wrk,
#                  redis-benchmark) it gives the client's own CPU. Call it as a command.
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
children_s() { # in this shell, not $(...): `times` in a subshell counts the subshell's children
  local f
  f=$(mktemp)
  times >"$f"
  CHILDREN_S=$(python3 -c "import re, sys; print(sum(float(m) * 60 + float(s) for m, s in re.findall(r'([0-9]+)m([0-9.]+)s', open(sys.argv[1]).read().splitlines()[-1])))" "$f")
  rm -f "$f"
}
