#!/usr/bin/env bash
# Installs what Squall needs on a Debian 12 machine (run as root). Idempotent and quick when
# everything is already there.
#   scripts/deps.sh run    toolchain to build and run Squall
#   scripts/deps.sh test   + what the tests need (tshark, scapy, pytest, nginx, curl, wrk, ab,
#                            h2load, chromium, tmux, cargo-fuzz, prometheus for promtool,
#                            libdpdk-dev for the DPDK port: built and tested with `--features dpdk`)
#   scripts/deps.sh bench  + what the benchmarks need (wrk, ab, nginx, /usr/bin/time)
set -euo pipefail
mode=${1:-run}
export DEBIAN_FRONTEND=noninteractive

need_apt=()
want() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed" || need_apt+=("$1"); }

# clang, libbpf-dev, libxdp-dev: squall-port's build compiles the XDP program
# (clang -target bpf; linux-libc-dev gives <asm/types.h>) and the AF_XDP shim (libxdp/libbpf).
for p in build-essential pkg-config python3 python3-pip python3-venv ca-certificates curl \
  clang libbpf-dev libxdp-dev linux-libc-dev; do want "$p"; done
if [ "$mode" = test ] || [ "$mode" = bench ]; then
  for p in tshark tcpdump iproute2 ethtool nginx curl apache2-utils libpcap-dev iputils-ping arping nftables libdpdk-dev prometheus; do want "$p"; done
  # chromium: squall report's test renders the HTML headless; tmux: the live view's test.
  for p in chromium tmux; do want "$p"; done
fi
if [ "$mode" = test ] || [ "$mode" = bench ]; then
  # wrk: the AF_XDP server lab test drives Squall with it too. nghttp2-client: h2load
  # (its HTTP/1.1 mode, --h1) against `squall serve` in the HTTP interop test.
  for p in wrk nghttp2-client; do want "$p"; done
fi
if [ "$mode" = bench ]; then
  for p in time; do want "$p"; done
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "deps.sh: missing Debian packages (${need_apt[*]}); run as root or install them" >&2; exit 1
  fi
  echo "deps.sh: installing ${need_apt[*]}" >&2
  # tshark asks whether non-root users may capture; answer no without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -q >/dev/null
  apt-get install -y -q --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Rust: stable from rustup (Debian's rustc is too old for the workspace).
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy
  export PATH="$HOME/.cargo/bin:$PATH"
fi

if [ "$mode" = test ] || [ "$mode" = bench ]; then
  py=python3
  $py -m pip --version >/dev/null 2>&1 || { echo "deps.sh: pip missing" >&2; exit 1; }
  pipflags=()
  $py -m pip install --help 2>/dev/null | grep -q -- --break-system-packages && pipflags+=(--break-system-packages)
  # prometheus_client: its text-format parser reads `--metrics` back (python/tests/test_metrics.py).
  $py -m pip install -q "${pipflags[@]}" -e ./python pytest scapy dpkt jsonschema mypy prometheus_client >/dev/null
fi
echo "deps.sh: ready ($mode)" >&2
