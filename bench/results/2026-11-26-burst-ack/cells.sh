#!/bin/bash
# make bench-mem's cells, --seconds 2 --runs 1, for the build in $1 (target dir)
T=$1; B=$T/release/squall-bench; X="--seconds 2 --runs 1"
taskset -c 1 $T/release/examples/wire64 --seconds 2
taskset -c 1 $B mem $X
taskset -c 1 $B mem --offload --workloads W1,W2 $X
taskset -c 1 $B mem --stacks squall --workloads W1,W2 --family ipv6 $X
taskset -c 1 $B mem --stacks squall --workloads W1 --conns 100,1000 --initwnd 2,10 $X
taskset -c 1 $B mem --stacks squall --workloads W1 --conns 100000 --seconds 3 --runs 1
taskset -c 1 $B mem --stacks squall,squall-serve --workloads W2,W3 --conns 1000 --flows 100000 $X
taskset -c 1 $B mem --stacks squall,squall-serve --workloads W1,W4 --conns 100 $X
$B mem2 $X
$B memn --cores 1,2 --workloads W1 --conns 1000 --pool 256 $X
$B loop $X
