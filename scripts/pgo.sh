#!/usr/bin/env bash
# Profile-guided release build of `squall` and `squall-bench` (docs/BENCHMARKS.md,
# "Profile-guided build"): an instrumented build runs the training set, LLVM merges the
# counts, and the release build in target/release is compiled with them (hot paths laid
# out together, cold code split away; the same source and code paths as a plain
# `cargo build --release`). The training set is the in-memory wire, which runs anywhere:
# the generator (`squall run`, W1 profile), the TCP host, the node and `squall serve`'s
# app and parser (`squall-bench mem`, W1/W2/W4). Code it does not reach (the AF_PACKET,
# AF_XDP and DPDK ports' own loops) is compiled as without profile.
#
# usage: scripts/pgo.sh [cargo build options, e.g. --features squall-port/dpdk,squall/dpdk]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

sysroot=$(rustc --print sysroot)
profdata=$(ls "$sysroot"/lib/rustlib/*/bin/llvm-profdata 2>/dev/null | head -n1 || true)
if [ -z "$profdata" ]; then
    echo "pgo: llvm-profdata not found: installing rustup's llvm-tools component" >&2
    rustup component add llvm-tools >&2 || true
    profdata=$(ls "$sysroot"/lib/rustlib/*/bin/llvm-profdata 2>/dev/null | head -n1 || true)
fi
if [ -z "$profdata" ]; then
    # The profile must be merged by the LLVM of this rustc; without it, a plain build.
    echo "pgo: WARNING: no llvm-profdata for this toolchain: plain release build" >&2
    exec cargo build --release -p squall -p squall-bench "$@"
fi

work=$PWD/target/pgo
rm -rf "$work"
mkdir -p "$work/raw"
echo "pgo: instrumented build (target/pgo-gen)" >&2
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$work/raw" CARGO_TARGET_DIR=target/pgo-gen \
    cargo build --release -p squall -p squall-bench "$@"

gen=target/pgo-gen/release
echo "pgo: training" >&2
(
    cd "$work"
    "$OLDPWD/$gen/squall" run "$OLDPWD/examples/w1-astf-http.json" --sim --duration 2 \
        --mult 20000 >/dev/null
    "$OLDPWD/$gen/squall-bench" mem --stacks squall,squall-serve --workloads W2 \
        --conns 100,1000 --seconds 1 --runs 1 >/dev/null
    "$OLDPWD/$gen/squall-bench" mem --stacks squall,squall-serve --workloads W1,W4 \
        --conns 100 --seconds 1 --runs 1 >/dev/null
)
"$profdata" merge -o "$work/merged.profdata" "$work/raw"
echo "pgo: release build with the profile (target/release)" >&2
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$work/merged.profdata" \
    cargo build --release -p squall -p squall-bench "$@"
echo "pgo: done: target/release/squall, target/release/squall-bench" >&2
