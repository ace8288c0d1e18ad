#!/bin/bash
# A whole run measured from outside: Snakemake under `/usr/bin/time -v` (its CPU and every job's, user and
# system, in time.txt) with the machine's /proc/stat "cpu" line sampled every 10 s beside it (proc_stat.txt:
# epoch seconds, then user nice system idle iowait irq softirq steal, in clock ticks). At the end it prints
# the run's wall, its CPU, and the machine's busy, idle, iowait and steal core-seconds over the run, so that
# CPU outside the jobs' own CPU lines (bench/run_time.py) can be told from idle cores (bench/README.md,
# "What a run spends outside its jobs").
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
sample() { while :; do echo "$(date +%s) $(head -1 /proc/stat | cut -d' ' -f3-10)" >> "$out/proc_stat.txt"; sleep 10; done; }
: > "$out/proc_stat.txt"
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
PY
exit $status
