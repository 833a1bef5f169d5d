#!/usr/bin/env bash
# Profile-guided build of `squall` and `squall-bench` (`make pgo`; docs/BENCHMARKS.md,
# "Session 26"): an instrumented build runs a training set, the toolchain's LLVM merges the
# counts, and a release build is compiled with them (hot paths laid out together, cold code
# split away; the same source and code paths as a plain `cargo build --release`).
#
# Experimental: the training set is the in-memory wire, which runs anywhere — the generator
# (`squall run`, the W1 profile), the TCP host, the node and `squall serve`'s app and parser
# over IPv4 (`squall-bench mem`, W1/W2/W4 with both servers). LLVM treats the code it does
# not reach as cold (optimised for size): the AF_PACKET, AF_XDP and DPDK ports' loops, IPv6,
# checksum offload, and smoltcp in squall-bench. So this build is for the in-memory figures
# it was trained on, not yet for runs on real ports, and `make bench-*` do not use it.
#
# Output: target/pgo-release/<host>/release/{squall,squall-bench} (target/release is left
# alone). PGO_REQUIRED=1: exit 75 when the toolchain has no llvm-profdata and rustup cannot
# add it (otherwise a plain build with a warning).
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
# The binaries built run (what CI checks), and where they are.
built() {
    "$out/$host/release/squall" --help >/dev/null
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
echo "pgo: training (~10 s)" >&2
(
    cd "$work"
    "$gen/squall" run "$OLDPWD/examples/w1-astf-http.json" --sim --duration 2 --mult 20000 \
        >/dev/null
    "$gen/squall-bench" mem --stacks squall,squall-serve --workloads W2 --conns 100,1000 \
        --seconds 1 --runs 1 >/dev/null
    "$gen/squall-bench" mem --stacks squall,squall-serve --workloads W1,W4 --conns 100 \
        --seconds 1 --runs 1 >/dev/null
)
"$profdata" merge -o "$work/merged.profdata" "$work/raw"
echo "pgo: release build with the profile ($out)" >&2
CARGO_ENCODED_RUSTFLAGS="-Cprofile-use=$work/merged.profdata" build "$out" "$@"
built
