#!/usr/bin/env bash
# What the two-sided private auction costs against the paper's: the private quickstart at K = 4, 16
# and 64 owners and eps_auc = 0.1 and 1, 10 seeds each, with the paper's auction, the
# two-sided auction (one request per round) and the two-sided auction asking as many owners as the
# paper's coins do on average. About 6 minutes on 2 cores.
#   bash docs/results/summarize_auction_cost.sh && python3 docs/results/summarize_auction_cost.py
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-runs/auction-cost}
common=(scenarios/quickstart-private.yaml --driver inprocess --quiet --repeats 10
        --sweep parties.owners=4,16,64 --sweep summarize.privacy.eps_auction=0.1,1)
marketplace run "${common[@]}" --set summarize.privacy.auction=paper --out "$out/paper"
marketplace run "${common[@]}" --set summarize.privacy.auction=two_sided --set summarize.privacy.requests_per_round=1 --out "$out/two-sided"
marketplace run "${common[@]}" --set summarize.privacy.auction=two_sided --set summarize.privacy.requests_per_round=auto --out "$out/two-sided-auto"
for v in paper two-sided two-sided-auto; do cp "$out/$v/runs.csv" "docs/results/summarize-auction-cost-$v-runs.csv"; done
