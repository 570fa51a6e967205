#!/bin/bash
# The experiments of docs/experiments.md (pfds section), one after the other (quick setting).
cd "$(dirname "$0")/../.." || exit 1
O=runs/pfds-exp
Q="--driver inprocess --quiet"
fresh() { rm -rf "$1"; echo "$1"; }  # `marketplace run` refuses a folder that holds an earlier run
set -x
date
time marketplace run scenarios/pfds-adult.yaml $Q --out "$(fresh $O/fidelity)" --set parties.owners=20 --set data.source.table.rows=10000 --set 'pfds.baselines=[pfds_minus]' --set pfds.baseline_agents=1 --sweep pfds.h_max=4,6,8,10 --repeats 2
time marketplace run scenarios/pfds-diabetes.yaml $Q --out "$(fresh $O/table2-diabetes)" --sweep pfds.epsilon=0.1,0.5,1.0 --sweep pfds.model=logistic,svm --repeats 3
time marketplace run scenarios/pfds-adult.yaml $Q --out "$(fresh $O/table2-adult)" --set parties.owners=20 --set data.source.table.rows=10000 --set pfds.baseline_agents=5 --sweep pfds.epsilon=0.1,0.5,1.0 --sweep pfds.model=logistic,svm
time marketplace run scenarios/pfds-bank.yaml $Q --out "$(fresh $O/table2-bank)" --set parties.owners=20 --set data.source.table.rows=10000 --set pfds.baseline_agents=5 --sweep pfds.epsilon=0.1,0.5,1.0 --sweep pfds.model=logistic,svm
time marketplace run scenarios/pfds-bike.yaml $Q --out "$(fresh $O/table2-bike)" --set parties.owners=20 --set data.source.table.rows=10000 --set pfds.baseline_agents=5 --sweep pfds.epsilon=0.1,0.5,1.0
time marketplace run scenarios/pfds-adult.yaml $Q --out "$(fresh $O/fig4-adult)" --set data.source.table.rows=10000 --set pfds.baseline_agents=5 --sweep parties.owners=5,10,20,50
time marketplace run scenarios/pfds-adult.yaml $Q --out "$(fresh $O/fig4-sharers-adult)" --set parties.owners=99 --set pfds.baseline_agents=5 --sweep pfds.sharers=10,25,50,75,99
time marketplace run scenarios/pfds-adult.yaml $Q --out "$(fresh $O/fig4-sharers-adult-svm)" --set parties.owners=99 --set pfds.baseline_agents=5 --set pfds.model=svm --sweep pfds.sharers=10,25,50,75,99
time marketplace run scenarios/pfds-bike.yaml $Q --out "$(fresh $O/fig4-sharers-bike)" --set parties.owners=99 --set pfds.baseline_agents=5 --sweep pfds.sharers=10,25,50,75,99
time marketplace run scenarios/pfds-diabetes.yaml $Q --out "$(fresh $O/table2-diabetes-cv)" --set pfds.epsilon=1.0 --sweep pfds.model=logistic,svm --sweep pfds.fold=0,1,2,3,4,5,6,7,8,9 --repeats 10
time marketplace run scenarios/pfds-adult.yaml --quiet --out "$(fresh $O/processes-20)" --set parties.owners=20 --set data.source.table.rows=10000 --set pfds.baseline_agents=5
date
