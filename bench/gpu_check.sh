#!/usr/bin/env bash
# The GPU check, prepared so that a lent GPU is measured in one call (about 5 minutes on an H200):
# the library's CUDA tests, then the exact mixture quadratic on CUDA at ridges 1e-2 / 1e-3 / 1e-4
# (cold and warm rows, the solver plan, one float64 Gram product and the solve in its units).
#
#   bash bench/gpu_check.sh [MIXTURE]     # from the repository root, on the GPU machine
#
# MIXTURE: a mixture file written by the workflow (default results/mnist/mixture.pt; the device tool
# sends only the working tree, so copy it into a carried folder first, e.g. .gpu/mixture.pt, and pass
# that path). Without one the bench uses its synthetic MNIST-like mixture (no --ridge rows then).
# Needs torch, numpy, pandas, pyarrow and pytest, no Snakemake. Everything it prints also goes to
# $OUT (the device tool's return folder) or /tmp/gpu_check.
set -uo pipefail
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
out=${OUT:-/tmp/gpu_check}
mkdir -p "$out"
py=${PYTHON:-python3}
mix=${1:-results/mnist/mixture.pt}

$py - <<'EOF' 2>&1 | tee "$out/device.txt"
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda)
if not torch.cuda.is_available():
    raise SystemExit("no CUDA device: this script is for a GPU machine")
print(torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))
EOF
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1

echo "== CUDA tests (tests/approx -k cuda)" | tee "$out/tests.log"
$py -m pytest -q -p no:cacheprovider tests/approx -k cuda 2>&1 | tee -a "$out/tests.log"
tests_rc=${PIPESTATUS[0]}

echo "== bench: exact quadratic on CUDA" | tee "$out/bench.md"
if [ -f "$mix" ]; then
  for ridge in 1e-2 1e-3 1e-4; do
    $py bench/approximants.py --devices cuda --hidden 256 --K 10 --methods quadratic_exact --mixture "$mix" \
      --ridge "$ridge" --json "$out/bench_ridge$ridge.jsonl" 2>&1 | tee -a "$out/bench.md"
  done
  $py bench/approximants.py --devices cuda --hidden 512 --K 10 --methods quadratic_exact --mixture "$mix" \
    2>&1 | tee -a "$out/bench.md"
else
  echo "no mixture file at $mix: synthetic MNIST-like mixture" | tee -a "$out/bench.md"
  $py bench/approximants.py --devices cuda --hidden 256 512 --K 10 --methods quadratic_exact --mixture /nonexistent \
    --json "$out/bench_synthetic.jsonl" 2>&1 | tee -a "$out/bench.md"
fi
exit "$tests_rc"
