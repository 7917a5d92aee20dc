#!/usr/bin/env bash
# Issue 11 item 15: the Blender suite (tests/blender/run.sh, both versions) N times in a row, counting crashes of
# every Python process it starts: a sitecustomize hook logs each process's pid at start, and the kernel's
# segfault lines (dmesg) since the loop began are matched against them (pids wrap at 32768 on a shared machine: a
# match is listed with the command it logged, to be checked). One summary line per run.
#
#   bash bench/blender_exit_loop.sh 10            # extra arguments go to run.sh (e.g. -k batch)
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-10}
shift || true
work=$(mktemp -d "${TMPDIR:-/tmp}/ff-exit-loop-XXXXXX")
mkdir "$work/sc"
cat > "$work/sc/sitecustomize.py" <<PY
import os, sys
with open("$work/pids.log", "a") as f:
    f.write(f"{os.getpid()} {open('/proc/uptime').read().split()[0]} {' '.join(sys.argv)[:200]!r}\n")
PY
since=$(cut -d' ' -f1 /proc/uptime)
crashes() {  # pids of our processes that segfaulted since the loop began
  dmesg 2>/dev/null | awk -v t="$since" '/segfault at/ { s=$0; gsub(/[][]/, "", $1); if ($1 + 0 > t + 0) {
    match(s, /\[[0-9]+\]: segfault/); print substr(s, RSTART + 1, RLENGTH - 12) } }' |
    grep -Fx -f <(cut -d' ' -f1 "$work/pids.log") || true
}
echo "loop: $N runs, logs in $work"
for i in $(seq 1 "$N"); do
  t0=$(date -u +%H:%M)
  PYTHONPATH="$work/sc${PYTHONPATH:+:$PYTHONPATH}" bash tests/blender/run.sh "$@" > "$work/run_$i.log" 2>&1
  rc=$?
  results=$(grep -E "^[0-9]+ (passed|failed)|^[0-9]+ failed" "$work/run_$i.log" | tr '\n' ';')
  failed=$(grep -E "^FAILED" "$work/run_$i.log" | sed 's/^FAILED //; s/ - .*//' | tr '\n' ' ')
  c=$(crashes | tr '\n' ' ')
  echo "run $i $t0-$(date -u +%H:%M) rc=$rc results=[$results] failed=[$failed] processes=$(wc -l < "$work/pids.log") segfaults_so_far=[$c]"
done
