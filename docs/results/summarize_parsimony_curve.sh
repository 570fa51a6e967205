#!/usr/bin/env bash
# The parsimony curve of the private auction: rho and the owners' points per summary point against
# K = 4 ... 1,000, for tau = 5 (fixed) and tau = ceil(K^(2/3)) (growing as the paper's bound needs),
# 10 seeds each, the private quickstart's data with an even partition, p = 100, in-process.
# About 6 minutes on 2 cores (the two tau settings run side by side).
#   bash docs/results/summarize_parsimony_curve.sh && python3 docs/results/summarize_parsimony_curve.py
set -euo pipefail
cd "$(dirname "$0")/../.."
owners=4,8,16,32,64,128,256,512,1000
pids=()
for tau in 5 grow; do
  rm -f "docs/results/summarize-parsimony-tau-$tau-runs.csv"
  python3 benchmarks/bench_parsimony.py --owners "$owners" --rounds 100 --seeds 1-10 --tau "$tau" \
      --csv "docs/results/summarize-parsimony-tau-$tau-runs.csv" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done  # fails (set -e) if either did
