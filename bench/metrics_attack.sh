#!/usr/bin/env bash
# One mnist_metrics job and one mnist_svd_ablation job on a finished run's inputs, through the CLI as
# their rules call them (`polyinterp <step> <files> --params JSON --threads 2`), timed (wall and CPU
# seconds, peak RSS), with the package imported from SRC, so that two commits can be compared:
#
#   bash bench/metrics_attack.sh SRC OUT [RUN_RESULTS] [SEED] [STEP]
#
# SRC: a checkout's src/ folder (e.g. an old commit unpacked with
#   git archive <commit> src | tar -x -C /tmp/polyinterp_old); OUT: a new folder for the outputs, laid
#   out as a run (OUT/results/mnist/...) so that `python bench/compare_runs.py OUT_A OUT_B` compares
#   the tables of two of them, and OUT/times.tsv (one row per job). RUN_RESULTS: a finished run's
#   results/ (default: results, this checkout's run; read only: its checkpoint, approximants,
#   mixture and MNIST file are copied to /tmp/bench_metrics_attack_inputs once). SEED, STEP: the
#   checkpoint (default 0 and 65536). Params: the paper config's (2·10^4 mixture samples; bases
#   mixture, gaussian, standard_normal; k_max 10; 5 random draws); DEVICE (env, default cpu) sets
#   their device. PYTHON (env): the interpreter (default .venv/bin/python). NICE (env):
#   a nice level for the jobs (default 0: none).
set -euo pipefail
src=$(cd "$1" && pwd)
out=$2
run=${3:-results}
seed=${4:-0}
step=${5:-65536}
py=${PYTHON:-.venv/bin/python}
device=${DEVICE:-cpu}
nice_level=${NICE:-0}

inputs=/tmp/bench_metrics_attack_inputs/seed${seed}_step${step}
if [ ! -f "$inputs/done" ]; then
  mkdir -p "$inputs"
  cp "$run/mnist/mlp_relu/seed$seed/ckpt/step$step.pt" "$inputs/ckpt.pt"
  cp "$run/mnist/mlp_relu/seed$seed/approx/step$step.pt" "$inputs/approx.pt"
  cp "$run/mnist/mixture.pt" "$inputs/mixture.pt"
  cp "$run/data/mnist.npz" "$inputs/mnist.npz"
  touch "$inputs/done"
fi

mkdir -p "$out/results/mnist/mlp_relu/seed$seed/metrics" "$out/results/mnist/mlp_relu/seed$seed/ablation"
printf 'job\twall_s\tcpu_s\tmax_rss_kb\n' > "$out/times.tsv"

job() {  # name, step, output flag, output path, params
  local name=$1 stepname=$2 flag=$3 path=$4 params=$5
  /usr/bin/time -o "$out/$name.time" -f "%e\t%U\t%S\t%M" \
    env PYTHONPATH="$src" nice -n "$nice_level" "$py" -m polyinterp "$stepname" \
      --ckpt "$inputs/ckpt.pt" --approx "$inputs/approx.pt" --mixture "$inputs/mixture.pt" \
      --data "$inputs/mnist.npz" "$flag" "$path" --params "$params" --threads 2 > "$out/$name.log" 2>&1
  awk -v n="$name" -F'\t' '{printf "%s\t%s\t%.2f\t%s\n", n, $1, $2 + $3, $4}' "$out/$name.time" >> "$out/times.tsv"
}

job metrics mnist_metrics --metrics "$out/results/mnist/mlp_relu/seed$seed/metrics/step$step.parquet" \
  "{\"mixture_samples\": 20000, \"device\": \"$device\"}"
job attack mnist_svd_ablation --table "$out/results/mnist/mlp_relu/seed$seed/ablation/step$step.parquet" \
  "{\"bases\": [\"mixture\", \"gaussian\", \"standard_normal\"], \"k_max\": 10, \"random_draws\": 5, \"device\": \"$device\"}"
column -t "$out/times.tsv"
