#!/bin/bash
# Every command line of `make bench-mem` but the T-memN squall-serve one, shortened to
# --seconds 2 --runs 1 (C=100,000: 3 s), for the build in the target directory $1: the
# before/after rounds of a change that touches the data path (docs/BENCHMARKS.md), run
# back to back for two builds (target/release's: `target`; the profile-guided build's:
# target/pgo-release/<host>). Prints the JSON lines.
set -u
T=$1; B=$T/release/squall-bench; X="--seconds 2 --runs 1"
# The wire's floor (a squall-port example: the plain build's when $1 has none).
W=$T/release/examples/wire64
if [ ! -x "$W" ]; then
    W=$(dirname "$0")/../target/release/examples/wire64
    echo "bench-mem-cells: $T has no wire64: the floor line is $W's" >&2
fi
taskset -c 1 "$W" --seconds 2
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
