#!/bin/bash
# The stc experiments of docs/experiments.md, one after the other. Writes runs/stc-exp/<name>/
# (runs.csv, summary.csv, sweep.png); docs/results/stc_tables.py turns them into the tables.
# Usage: bash docs/results/stc_run_all.sh [synthetic|mnist|office|super|headline30|nas|coreset ...] (default: all)
cd "$(dirname "$0")/../.." || exit 1
O=runs/stc-exp
Q="--driver inprocess --quiet"
K="--sweep stc.k=5,10,20,40 --sweep stc.privacy.notion=dp,zcdp --set stc.baselines=[cluster_t,nonprivate_stc,private_kmeans]"
R=${REPEATS:-30}  # the paper's 30 for synthetic and MNIST
RS=${REPEATS_SMALL:-10}  # Office and Superconductivity (small sets; 30 would do too, given the time)
parts=${*:-synthetic mnist office super headline30 nas coreset}
fresh() { rm -rf "$1"; echo "$1"; }  # `marketplace run` refuses a folder that holds an earlier run
set -x
date
for part in $parts; do
  case $part in
  synthetic)
    for w in 1 2 3; do
      marketplace run scenarios/stc-synthetic.yaml $Q --out "$(fresh $O/syn$w)" --set data.source.stc_synthetic.which=$w $K --repeats $R
    done ;;
  mnist)  # digit pairs (source, target) of the paper
    for pair in "1 7" "5 2" "9 6"; do
      set -- $pair
      marketplace run scenarios/stc-mnist.yaml $Q --out "$(fresh $O/mnist$1$2)" --set "data.partition.groups=[$1]" \
        --set "data.consumer.target_groups=[$2]" --set data.consumer.validation_size=850 $K --repeats $R
    done ;;
  office)  # every ordered pair of amazon (0), webcam (1), dslr (2)
    size=(956 294 156)  # T: the target pool (0.999 of the domain, rounded) but one row (amazon 958, webcam 295, dslr 157)
    for pair in "0 1" "1 0" "0 2" "2 0" "1 2" "2 1"; do
      set -- $pair
      marketplace run scenarios/stc-office.yaml $Q --out "$(fresh $O/office$1$2)" --set "data.partition.groups=[$1]" \
        --set "data.consumer.target_groups=[$2]" --set data.consumer.validation_size=${size[$2]} $K --repeats $RS
    done
    marketplace run scenarios/stc-office.yaml $Q --out "$(fresh $O/office01-googlenet)" --set data.source.office_caltech.features=googlenet \
      $K --repeats $RS ;;
  super)  # critical-temperature quartiles low (0) .. high (3)
    size=(174 215 284 295)  # T: the whole target quartile but one row (175, 216, 285, 296 rows)
    for pair in "0 3" "3 0" "3 2" "2 3" "0 1" "1 0"; do
      set -- $pair
      marketplace run scenarios/stc-superconductivity.yaml $Q --out "$(fresh $O/super$1$2)" --set "data.partition.groups=[$1]" \
        --set "data.consumer.target_groups=[$2]" --set data.consumer.validation_size=${size[$2]} $K --repeats $RS
    done ;;
  headline30)  # the paper's Figure 3 real-data pairs (and low -> high) at the paper's 30 repeats
    marketplace run scenarios/stc-office.yaml $Q --out "$(fresh $O/office01)" --set "data.partition.groups=[0]" \
      --set "data.consumer.target_groups=[1]" --set data.consumer.validation_size=294 $K --repeats 30
    marketplace run scenarios/stc-superconductivity.yaml $Q --out "$(fresh $O/super32)" --set "data.partition.groups=[3]" \
      --set "data.consumer.target_groups=[2]" --set data.consumer.validation_size=284 $K --repeats 30
    marketplace run scenarios/stc-superconductivity.yaml $Q --out "$(fresh $O/super03)" --set "data.partition.groups=[0]" \
      --set "data.consumer.target_groups=[3]" --set data.consumer.validation_size=295 $K --repeats 30 ;;
  nas)  # NAS with t in {75, 150, 300} on the paper's headline pairs
    marketplace run scenarios/stc-mnist.yaml $Q --out "$(fresh $O/nas-mnist96)" --set stc.release=nas --set "data.partition.groups=[9]" \
      --set "data.consumer.target_groups=[6]" --set data.consumer.validation_size=850 --sweep stc.t=75,150,300 $K --repeats 10
    marketplace run scenarios/stc-office.yaml $Q --out "$(fresh $O/nas-office01)" --set stc.release=nas --sweep stc.t=75,150,300 $K --repeats 10
    marketplace run scenarios/stc-superconductivity.yaml $Q --out "$(fresh $O/nas-super32)" --set stc.release=nas \
      --set "data.partition.groups=[3]" --set "data.consumer.target_groups=[2]" --set data.consumer.validation_size=284 --sweep stc.t=75,150,250 $K --repeats 10 ;;  # S: 296 rows, so t <= 296
  coreset)  # NNA against a kd-tree coreset of T (cells of diameter <= C, scaled units)
    marketplace run scenarios/stc-synthetic.yaml $Q --out "$(fresh $O/coreset-syn2)" --sweep stc.coreset=0.005,0.01,0.02,0.05 \
      --sweep stc.k=10,20 --repeats 10
    marketplace run scenarios/stc-mnist.yaml $Q --out "$(fresh $O/coreset-mnist96)" --set "data.partition.groups=[9]" \
      --set "data.consumer.target_groups=[6]" --set data.consumer.validation_size=850 \
      --sweep stc.coreset=0.01,0.02,0.05,0.1 --sweep stc.k=10,20 --repeats 10 ;;
  esac
done
date
