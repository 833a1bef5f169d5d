#!/bin/bash
# Phase-gated A/B of T-memif W1: a run starts only when the cross-core probe reads
# < 150 ns twice in a row; every probe line is kept with the probe before and after.
cd /work/main
RATE=${RATE:-160000}; ROUNDS=${ROUNDS:-6}
good() { local a b; a=$(/tmp/xcore-pingpong 2 | tr '\n' ' '); set -- $a; [ "${1:-999}" -lt 150 ] && [ "${2:-999}" -lt 150 ]; }
for r in $(seq 1 $ROUNDS); do for v in main new; do if [ $v = main ]; then S=/tmp/wt-main-target/release/squall; else S=/tmp/squall-new; fi
  n=0; until good || [ $n -ge 60 ]; do sleep 1; n=$((n+1)); done
  echo "== $v $r $(date +%T) waited ${n}s"
  flock /tmp/squall-lab.lock timeout 600 /tmp/squall-bench-new memif --workloads W1 --servers ${SERVERS:-squall-serve} --clients squall --runs 1 --seconds 5 --w1-cps $RATE --squall $S 2>&1 | grep -E 'probe at|^\{'
  echo "   after: $(/tmp/xcore-pingpong 2 | tr '\n' ' ')"
done; done
