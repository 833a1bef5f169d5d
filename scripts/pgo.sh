#!/usr/bin/env bash
# Profile-guided build of `squall` and `squall-bench` (`make pgo`; the build `make bench-*`
# measure; docs/BENCHMARKS.md "Session 27"): an instrumented build runs a training set, the
# toolchain's LLVM merges the counts, and a release build is compiled with them (hot paths
# laid out together, cold code split away; the same source and code paths as a plain
# `cargo build --release`).
#
# The training runs what users and the benchmarks run, so that no path they take is left
# cold (LLVM optimises the code a training does not reach for size): the in-memory wire —
# the generator, the TCP host over IPv4 and IPv6, the node, `squall serve`'s app and parser,
# the HTTP-aware client, checksum offload, per-core shards, and smoltcp, the peer built
# into squall-bench (the same build for it) — and, as root, the real ports' loops: DPDK's
# net_memif (with the dpdk feature), AF_PACKET and AF_XDP on the lab's veth. A stage this
# machine cannot run is said (PGO_FULL=1, as CI runs it: an error). What ran is written
# to squall-build.txt beside the binaries; squall-bench's lines then carry it ("build").
#
# Output: target/pgo-release/<host>/release/{squall,squall-bench,squall-build.txt}
# (target/release is left alone). PGO_REQUIRED=1: exit 75 when the toolchain has no
# llvm-profdata and rustup cannot add it (otherwise a plain build with a warning).
#
# usage: scripts/pgo.sh [cargo build options, e.g. --features squall-port/dpdk,squall/dpdk]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
    echo "pgo: $profdata not found: installing rustup's llvm-tools component" >&2
    rustup component add llvm-tools >&2 || true
fi
out=target/pgo-release
# The release build of the two binaries into target dir $1 (the rest: cargo options).
build() {
    local dir=$1
    shift
    CARGO_TARGET_DIR=$dir cargo build --release --target "$host" -p squall -p squall-bench "$@"
}
# The binaries built run (what CI checks), and where they are; target/pgo-release/bin
# points at them whatever the host (what `make bench-*` run; target/pgo-release/release
# is cargo's, for build scripts).
built() {
    "$out/$host/release/squall" --help >/dev/null
    ln -sfn "$host/release" "$out/bin"
    echo "pgo: done: $out/$host/release/squall, $out/$host/release/squall-bench" >&2
}
if [ ! -x "$profdata" ]; then
    # The counts must be merged by the LLVM of this rustc.
    if [ "${PGO_REQUIRED:-0}" = 1 ]; then
        echo "pgo: no llvm-profdata for this toolchain (PGO_REQUIRED=1)" >&2
        exit 75
    fi
    echo "pgo: WARNING: no llvm-profdata for this toolchain: a plain release build" >&2
    build "$out" "$@"
    # Its lines say so ("build":"plain:no-llvm-profdata").
    echo "plain:no-llvm-profdata" >"$out/$host/release/squall-build.txt"
    built
    exit 0
fi

work=$PWD/target/pgo
rm -rf "$work"
mkdir -p "$work/raw"
# `--target`: the flags reach the crates of the binaries only, not build scripts or
# proc-macros (which would run instrumented during the build). CARGO_ENCODED_RUSTFLAGS:
# one flag, kept whole even if the path has spaces.
echo "pgo: instrumented build (target/pgo-gen)" >&2
CARGO_ENCODED_RUSTFLAGS="-Cprofile-generate=$work/raw" build target/pgo-gen "$@"

gen=$PWD/target/pgo-gen/$host/release
# What the training ran, for the marker beside the binaries (`squall-build.txt`: every
# squall-bench line of this build carries it as "build").
trained=()
# One training stage: its name, then the command (output in target/pgo/<name>.log).
stage() {
    local name=$1
    shift
    echo "pgo: training: $name" >&2
    if "$@" >"$work/$name.log" 2>&1; then
        trained+=("$name")
    else
        echo "pgo: training stage $name failed (target/pgo/$name.log):" >&2
        tail -n 20 "$work/$name.log" >&2
        return 1
    fi
}
# A stage that needs what this machine may not have (the real ports, the kernel's cubic):
# run where it can; otherwise said, and with PGO_FULL=1 (as CI runs it) an error.
optional() {
    local name=$1
    stage "$@" || missing "$name" "the stage failed (target/pgo/$name.log)"
}
missing() {
    echo "pgo: WARNING: not trained on $1: $2" >&2
    if [ "${PGO_FULL:-0}" = 1 ]; then
        echo "pgo: PGO_FULL=1: every stage must run" >&2
        exit 1
    fi
}
cd "$work"
# The in-memory wire (anywhere): the generator on the W1 profile, the TCP host, the node,
# `squall serve`'s app and parser, the HTTP-aware client, IPv6, emulated checksum offload,
# per-core shards, idle connections — and smoltcp, the peer built into squall-bench,
# trained on the same cells so that it gets the same build.
stage mem-generator "$gen/squall" run "$OLDPWD/examples/w1-astf-http.json" --sim \
    --duration 2 --mult 20000
stage mem-w2 "$gen/squall-bench" mem --stacks smoltcp,squall,squall-serve --workloads W2 \
    --conns 100,1000 --seconds 1 --runs 1
stage mem-w1-w4 "$gen/squall-bench" mem --stacks smoltcp,squall,squall-serve \
    --workloads W1,W4 --conns 100 --seconds 1 --runs 1
stage mem-ipv6 "$gen/squall-bench" mem --stacks squall --workloads W1,W2 --conns 100 \
    --family ipv6 --seconds 1 --runs 1
stage mem-offload "$gen/squall-bench" mem --offload --workloads W1,W2 --conns 100 \
    --seconds 1 --runs 1
stage mem-w3 "$gen/squall-bench" mem --stacks smoltcp,squall,squall-serve --workloads W3 \
    --flows 20000
stage mem-shards "$gen/squall-bench" memn --cores 1,2 --stacks squall,squall-serve \
    --workloads W1,W2 --conns 100 --seconds 1 --runs 1
stage mem-threads "$gen/squall-bench" mem2 --workloads W1,W2 --conns 100 --seconds 1 --runs 1
# squall-bench's kernel driver (T-loop), which measures the kernel beside Squall.
optional loop "$gen/squall-bench" loop --workloads W1,W2 --conns 100 --seconds 1 --runs 1
# The real ports' loops (root): DPDK's net_memif between two processes (a build with the
# dpdk feature), AF_PACKET and AF_XDP on the lab's veth (squall-bench's T-veth cells with
# Squall on both sides; the lab lock held, the host's congestion-control list restored).
if [ "$(id -u)" != 0 ]; then
    missing "the real ports (memif, AF_PACKET, AF_XDP)" "not root"
else
    if [[ " $* " == *dpdk* ]]; then
        optional memif "$gen/squall-bench" memif --workloads W1,W2 --conns 100 --seconds 1 \
            --runs 1 --servers squall,squall-serve --clients squall,squall-http \
            --w1-cps 20000,5000
    else
        missing "DPDK (memif)" "a build without the dpdk feature (scripts/pgo.sh --features squall-port/dpdk,squall/dpdk)"
    fi
    # One veth stage: the lab lock held, the lab torn down and the host's congestion-control
    # list restored on the way out (as `make bench-veth`). Arguments: the squall-bench
    # binary ($0), the project root, the port, the workloads.
    read -r -d '' veth_stage <<'EOS' || true
root=$1 port=$2 workloads=$3
cc=/proc/sys/net/ipv4/tcp_allowed_congestion_control
orig=$(cat "$cc")
trap '"$root"/scripts/lab.sh down >/dev/null 2>&1; echo "$orig" >"$cc"' EXIT
"$0" veth --root "$root" --port "$port" --workloads "$workloads" --frame-sizes 64,1514 \
    --pairs squall/squall,squall-http/squall-serve --conns 100 --seconds 1 --runs 1 \
    --w1-cps 5000
EOS
    # (AF_PACKET's stage also runs the raw-veth line's frame blaster: the floor of the
    # frames' clause is measured by this build too.)
    for port in afpacket afxdp; do
        w=W1,W2
        if [ "$port" = afpacket ]; then w=raw,W1,W2; fi
        optional "veth-$port" flock /tmp/squall-lab.lock bash -c "$veth_stage" \
            "$gen/squall-bench" "$OLDPWD" "$port" "$w"
    done
fi
cd "$OLDPWD"
"$profdata" merge -o "$work/merged.profdata" "$work/raw"
echo "pgo: release build with the profile ($out)" >&2
CARGO_ENCODED_RUSTFLAGS="-Cprofile-use=$work/merged.profdata" build "$out" "$@"
label="pgo:$(IFS=,; echo "${trained[*]}")"
echo "$label" >"$out/$host/release/squall-build.txt"
echo "pgo: $label" >&2
built
