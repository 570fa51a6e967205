#!/usr/bin/env bash
# What the composed auction (the default) costs against the two-sided one: the private quickstart
# at K = 16, 64 and 256 owners and eps_auc = 0.1 and 1, 10 seeds each (7 to 16), one request per
# round, the scenario's 40 rounds. About 5 minutes on 2 cores.
#   bash docs/results/summarize_auction_composed.sh && python3 docs/results/summarize_auction_composed.py
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-runs/auction-composed}
common=(scenarios/quickstart-private.yaml --driver inprocess --quiet --repeats 10
        --sweep parties.owners=16,64,256 --sweep summarize.privacy.eps_auction=0.1,1)
for rule in composed two_sided; do
  marketplace run "${common[@]}" --set summarize.privacy.auction=$rule --out "$out/$rule"
done
python3 docs/results/summarize_auction_composed.py --collect "$out"
