# Squall — top-level entry points. `make run` and `make test` are the two commands of the
# README's quick start; each first installs what it needs (scripts/deps.sh, idempotent).
SHELL := /bin/bash
CARGO ?= cargo
PY ?= python3
SECONDS_PER_FUZZ ?= 5
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: all build run test test-rust test-python lint fmt fuzz bench bench-build bench-mem bench-veth pgo deps-run deps-test clean

all: build

deps-run:
	@scripts/deps.sh run
deps-test:
	@scripts/deps.sh test

build:
	$(CARGO) build --release --workspace

# The profile-guided build of squall and squall-bench (the build for deployments and the
# one the benchmarks measure): scripts/pgo.sh, in target/pgo-release/<host>/release (and
# target/pgo-release/bin, a link to it),
# trained on the in-memory wire and, as root, on the real ports (memif, AF_PACKET,
# AF_XDP); about 7 minutes. With the dpdk feature where libdpdk-dev is installed (deps.sh
# installs it for root: T-memif needs it). docs/BENCHMARKS.md "Session 27".
pgo:
	f=""; if pkg-config --exists libdpdk; then f="$(DPDK_FEATURES)"; fi; scripts/pgo.sh $$f

# The main job on the embedded default (both sides over the in-memory wire, no root needed).
run: deps-run
	$(CARGO) build --release -p squall
	./target/release/squall run examples/w1-astf-http.json --duration 5 --mult 20000

# Everything CI runs: format, lints, Rust unit + integration tests, Python tests,
# scapy/tshark cross-checks, a short fuzz run of every parser.
test: deps-test lint test-rust test-python fuzz

# The DPDK port (squall-port's `dpdk` feature, `--iface dpdk` in squall): needs libdpdk-dev
# (scripts/deps.sh test); linted both ways, tested with it.
DPDK_FEATURES := --features squall-port/dpdk,squall/dpdk

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --workspace --all-targets $(DPDK_FEATURES) -- -D warnings

test-rust:
	$(CARGO) test --workspace --profile ci $(DPDK_FEATURES)
	# squall's own unit tests built without DPDK too: the clear errors of that build
	# (`--iface dpdk` / `--eal` without the feature) are tested there.
	$(CARGO) test --profile ci -p squall --lib
	# The full-size TCP scenarios: 100,000 W1 flows under each impairment (virtual clock).
	$(CARGO) test --profile ci -p squall-tcp --test w1_scenarios -- --ignored

test-python:
	cd python && $(PY) -m mypy --strict squall
	$(CARGO) build --profile ci -p squall --bin squall
	SQUALL_BIN=$(CURDIR)/target/ci/squall $(PY) -m pytest -q python/tests
	$(PY) -m pytest -q tests/crosscheck

fuzz:
	scripts/fuzz.sh $(SECONDS_PER_FUZZ)

fmt:
	$(CARGO) fmt --all

bench: bench-mem bench-veth

# The build the benchmarks measure: BENCH_BUILD=pgo (default: `make pgo`'s, its lines carry
# "build":"pgo:<training>") or BENCH_BUILD=plain (cargo build --release, no "build" field),
# for a side-by-side of the two. Built once per make invocation (`make bench` builds once).
# (With the dpdk feature where libdpdk-dev is installed, as `make pgo`.)
BENCH_BUILD ?= pgo
BIN = $(if $(filter plain,$(BENCH_BUILD)),target/release,target/pgo-release/bin)
bench-build:
	@if [ "$$(id -u)" = 0 ]; then scripts/deps.sh bench; fi
	@case "$(BENCH_BUILD)" in pgo|plain) ;; *) echo "BENCH_BUILD=$(BENCH_BUILD): pgo or plain" >&2; exit 2;; esac
ifeq ($(BENCH_BUILD),pgo)
	$(MAKE) pgo
else
	f=""; if pkg-config --exists libdpdk; then f="$(DPDK_FEATURES)"; fi; \
	$(CARGO) build --release -p squall -p squall-bench $$f
endif

# One JSON line per cell (docs/BENCHMARKS.md): the wire64 floor, W1/W2/W3 for Squall and
# smoltcp on T-mem1 (software checksums, then a second row with checksum offload emulated on
# both sides), Squall's W1/W2 over IPv6 ("family":"ipv6"), W1 at C = 100,000 (Squall;
# smoltcp finds sockets by linear scan), and the kernel on T-loop for context, and W2
# through HTTP (`squall serve`'s app as the server, the answers parsed by squall-http)
# beside raw W2 of the same run, with W3 (idle connections) on both servers, then W1 and W4
# (a 2,649-byte file, a connection per request and keep-alive: "keepalive":false/true)
# at C = 100 with both servers; T-memN (W1 on 1 and 2 per-core shards, and W1/W2 with
# `squall serve`'s app as each shard's server). About 10 minutes, after the build
# (BENCH_BUILD above; the wire64 floor is a squall-port example of the plain build).
bench-mem: bench-build
	$(CARGO) build --release -p squall-port --example wire64
	./target/release/examples/wire64 --seconds 3
	./$(BIN)/squall-bench mem
	./$(BIN)/squall-bench mem --offload --workloads W1,W2
	./$(BIN)/squall-bench mem --stacks squall --workloads W1,W2 --family ipv6
	./$(BIN)/squall-bench mem --stacks squall --workloads W1 --conns 100,1000 --initwnd 2,10
	./$(BIN)/squall-bench mem --stacks squall --workloads W1 --conns 100000 --seconds 5
	./$(BIN)/squall-bench mem --stacks squall,squall-serve --workloads W2,W3 --conns 1000 --flows 100000
	./$(BIN)/squall-bench mem --stacks squall,squall-serve --workloads W1,W4 --conns 100
	./$(BIN)/squall-bench mem2
	./$(BIN)/squall-bench memn --cores 1,2 --workloads W1 --conns 1000 --pool 256
	./$(BIN)/squall-bench memn --cores 1,2 --stacks squall-serve --workloads W1,W2 --conns 1000 --pool 256
	./$(BIN)/squall-bench loop

# T-veth (needs root): the raw-veth floor line (64- and 1514-byte frames over AF_PACKET),
# then W1 and W2 (C = 100, 1000) for the seven pairs — ab/wrk, Squall's client or its
# HTTP-aware client (`squall-http`) against nginx, Squall's server (`squall run`, raw) or
# `squall serve` (`squall-serve`: ab/wrk and squall-http against it) — and W4 (2,649-byte
# file, ab -c 100 with and without -k, squall-http) against nginx and `squall serve`,
# between the lab's namespaces, client on core 0, server on
# core 1, medians of 3 runs of 5 s. About 15 minutes. Holds the machine-wide lab lock for
# the whole run; the lab is torn down (and the host's congestion-control list restored)
# even if the harness dies, still under the lock. PORT=afxdp runs Squall's sides over
# AF_XDP (copy mode on the veth; no TCP super-frames, so its W1 server sends every segment
# on its own: docs/BENCHMARKS.md "T-veth over AF_XDP"); AF_PACKET is the default.
# VETH_ARGS="--workloads W2 --runs 1" etc. for a part of it.
# Then T-memif: W1 and W2 (C = 100, 1000) between two Squall processes over DPDK's
# net_memif (client core 0, server core 1, no kernel in the path; squall is built with the
# dpdk feature for it), with `squall run` and then `squall serve` as the server, medians
# of 3. About 8 minutes; MEMIF_ARGS for a part of it (MEMIF_ARGS="--servers squall-serve
# --clients squall,squall-http" adds the HTTP-aware client).
PORT ?= afpacket
VETH_ARGS ?=
MEMIF_ARGS ?=
bench-veth: bench-build
	@scripts/deps.sh bench
	flock /tmp/squall-lab.lock bash -c 'orig=$$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control); \
	  trap "scripts/lab.sh down >/dev/null 2>&1; echo \"$$orig\" > /proc/sys/net/ipv4/tcp_allowed_congestion_control" EXIT; \
	  ./$(BIN)/squall-bench veth --port $(PORT) $(VETH_ARGS)'
	./$(BIN)/squall-bench memif $(MEMIF_ARGS)

clean:
	$(CARGO) clean
