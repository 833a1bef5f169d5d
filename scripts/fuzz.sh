#!/usr/bin/env bash
# Run every fuzz target (squall-wire, squall-http, squall-tcp's host, squall serve's app) for SECONDS each (default 10).
# Installs cargo-fuzz if missing. Uses the nightly toolchain if present,
# otherwise stable with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs -Z flags).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail

SECONDS_PER_TARGET="${1:-10}"
shift || true
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    FUZZ=(cargo +nightly fuzz)
else
    echo "fuzz.sh: no nightly toolchain, using stable with RUSTC_BOOTSTRAP=1" >&2
    export RUSTC_BOOTSTRAP=1
    FUZZ=(cargo fuzz)
fi

if [ "$#" -gt 0 ]; then
    TARGETS=("$@")
else
    mapfile -t TARGETS < <("${FUZZ[@]}" list)
fi

# Seed the corpora with frames made by squall-wire's builders (every option
# kind, VLAN, IP options, UDP, ICMP, ARP) so short runs start deep.
if ! (cd "$ROOT" && cargo run -q -p squall-wire --example wirecheck -- seeds "$ROOT/fuzz/corpus"); then
    echo "fuzz.sh: could not write seed corpus, fuzzing from scratch" >&2
fi

# Build all targets once, then run each for the time budget.
"${FUZZ[@]}" build

failed=()
for t in "${TARGETS[@]}"; do
    echo "=== fuzz target $t: ${SECONDS_PER_TARGET}s" >&2
    mkdir -p "corpus/$t"
    if ! "${FUZZ[@]}" run "$t" "corpus/$t" -- \
        -max_total_time="$SECONDS_PER_TARGET" -max_len=2048 -print_final_stats=1; then
        failed+=("$t")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: FAILED targets: ${failed[*]} (crashes in fuzz/artifacts/)" >&2
    exit 1
fi
echo "fuzz.sh: all ${#TARGETS[@]} targets ran ${SECONDS_PER_TARGET}s without a crash" >&2
