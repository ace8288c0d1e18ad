#!/bin/bash
# A whole run measured from outside: Snakemake under `/usr/bin/time -v` (its CPU and every job's, user and
# system, in time.txt) with the machine's /proc/stat "cpu" line sampled every 10 s beside it (proc_stat.txt:
# epoch seconds, then user nice system idle iowait irq softirq steal, in clock ticks). At the end it prints
# the run's wall, its CPU, and the machine's busy, idle, iowait and steal core-seconds over the run, so that
# CPU outside the jobs' own CPU lines (bench/run_time.py) can be told from idle cores (bench/README.md,
# "What a run spends outside its jobs"). Every second it also reads Snakemake's own process
# (snakemake_stat.txt: epoch seconds, then its utime stime cutime cstime in clock ticks, /proc/PID/stat),
# so that the CPU of Snakemake itself (all its threads) is told from that of the jobs it has reaped.
#
#   bench/timed_run.sh <folder for time.txt and proc_stat.txt> [snakemake arguments ...]
#   e.g. nohup bench/timed_run.sh /tmp/paper_timing --cores 2 --configfile workflow/configs/paper.yaml > run.log 2>&1 &
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: bench/timed_run.sh OUT_DIR [snakemake arguments ...]" >&2
    exit 2
fi
out=$1; shift
if [ ! -x /usr/bin/time ]; then
    echo "timed_run: /usr/bin/time (GNU time) is missing; install it (Debian: apt-get install time)" >&2
    exit 2
fi
mkdir -p "$out"
script=$$
# Snakemake's own /proc/PID/stat fields 14-17 (utime stime cutime cstime), found once as the child of this script's
# /usr/bin/time (the kernel's list of a task's children), then read every second with shell builtins alone (no
# process started beside the run); the command name, field 2, is skipped past its closing parenthesis (it may
# hold spaces).
children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -v '^$' || true; }
snakemake_pid=""
find_snakemake() {
    local pid
    for pid in $(children "$script"); do
        if [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = time ]; then
            snakemake_pid=$(children "$pid" | head -1)
        fi
    done
    [ -n "$snakemake_pid" ]
}
snakemake_stat() {
    local line
    [ -n "$snakemake_pid" ] || find_snakemake || return 0
    read -r line < "/proc/$snakemake_pid/stat" || return 0
    set -- ${line##*) }
    printf '%(%s)T %s %s %s %s\n' -1 "${12}" "${13}" "${14}" "${15}" >> "$out/snakemake_stat.txt"
}
sample() {
    local i=0
    while :; do
        if [ $((i % 10)) -eq 0 ]; then echo "$(date +%s) $(head -1 /proc/stat | cut -d' ' -f3-10)" >> "$out/proc_stat.txt"; fi
        snakemake_stat
        i=$((i + 1))
        sleep 1
    done
}
: > "$out/proc_stat.txt"
: > "$out/snakemake_stat.txt"
sample </dev/null >/dev/null 2>&1 & sampler=$!  # no fd of ours held open by its sleep
trap 'kill $sampler 2>/dev/null || true' EXIT
status=0
/usr/bin/time -v -o "$out/time.txt" snakemake "$@" || status=$?
kill $sampler 2>/dev/null || true
wait $sampler 2>/dev/null || true
echo "$(date +%s) $(head -1 /proc/stat | cut -d' ' -f3-10)" >> "$out/proc_stat.txt"
hz=$(getconf CLK_TCK)
python3 - "$out" "$hz" <<'PY' || echo "timed_run: could not summarise $out (time.txt, proc_stat.txt); the run's status follows" >&2
import re, sys
from pathlib import Path
out, hz = Path(sys.argv[1]), int(sys.argv[2])
rows = [list(map(int, line.split())) for line in (out / "proc_stat.txt").read_text().split("\n") if line.strip()]
first, last = rows[0], rows[-1]
d = [(b - a) / hz for a, b in zip(first[1:], last[1:])]
user, nice, system, idle, iowait, irq, softirq, steal = d
t = (out / "time.txt").read_text()
num = lambda key: float(re.search(rf"{key}: ([\d.]+)", t).group(1))
print(f"wall {last[0] - first[0]} s (sampled); snakemake and its jobs: user {num('User time .seconds.')} s, "
      f"system {num('System time .seconds.')} s")
print(f"machine over the run: busy {user + nice + system + irq + softirq:.0f} core-s, idle {idle:.0f}, "
      f"iowait {iowait:.0f}, steal {steal:.0f}")
own = [line.split() for line in (out / "snakemake_stat.txt").read_text().split("\n") if line.strip()]
if own:
    t, ut, st, cut, cst = map(int, own[-1])
    print(f"snakemake's own process: {(ut + st) / hz:.1f} CPU s; the jobs it had reaped: {(cut + cst) / hz:.1f} "
          f"CPU s (its last sample, {last[0] - t} s before the end)")
PY
exit $status
