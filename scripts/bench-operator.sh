#!/usr/bin/env bash
# The cost of watching a run (issue #14): W1 per-flow CPU of `squall run` on one worker
# (T-mem1) with nothing watching (`-q`: no side snapshots, no live view, no metrics) and
# watched (the live view in a tmux pane, `--metrics` scraped once a second by curl,
# `--json` with the time series), in interleaved pairs under the same conditions.
# One JSON line per run, then the medians and the relative cost:
#   {"bench":"operator-cost","variant":"quiet"|"watched","cpu_us_per_flow":..,
#    "busy_cpu_us_per_flow":..,"process_cpu_us_per_flow":..}
#   {"bench":"operator-cost","summary":true,"quiet":..,"watched":..,"cost_pct":..,...}
# cpu_us_per_flow is the summary's figure (the worker thread's CPU per completed flow);
# process_cpu_us_per_flow adds every other thread of the process (the watcher drawing the
# view, the metrics server), from /usr/bin/time.
# Env: SQUALL_BIN (target/release/squall), PAIRS (5), DUR (5 s), MULT (20000), PORT (19464).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${SQUALL_BIN:-target/release/squall}
PAIRS=${PAIRS:-5}
DUR=${DUR:-5}
MULT=${MULT:-20000}
PORT=${PORT:-19464}
PROFILE=examples/w1-astf-http.json
for t in tmux curl /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "bench-operator: $t missing (scripts/deps.sh bench)" >&2; exit 1; }
done
[ -x "$BIN" ] || { echo "bench-operator: no $BIN (cargo build --release -p squall)" >&2; exit 1; }
work=$(mktemp -d)
sock="squall-bench-$$"
cleanup() { tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# Prints "worker busy process" us per flow of one run's summary + time output.
figures() {
  local out=$1 tim=$2
  python3 - "$out" "$tim" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"= ([0-9.]+) us per completed flow \(([0-9.]+) us in busy", text)
if m is None:
    sys.exit("bench-operator: no CPU figure in the summary:\n" + text[-2000:])
flows = int(re.search(r"^  completed\s+(\d+)", text, re.M).group(1))
u, s = open(sys.argv[2]).read().split()[-2:]  # the last line: "%U %S"
print(m.group(1), m.group(2), (float(u) + float(s)) * 1e6 / max(flows, 1))
PY
}

line() {
  echo "{\"bench\":\"operator-cost\",\"variant\":\"$1\",\"cpu_us_per_flow\":$2,\"busy_cpu_us_per_flow\":$3,\"process_cpu_us_per_flow\":$4,\"duration_sec\":$DUR,\"mult\":$MULT}"
}

quiet=(); watched=()
for i in $(seq "$PAIRS"); do
  # A saturated run may end with errors (exit 1): its CPU figures still count.
  /usr/bin/time -f "%U %S" -o "$work/q.time" "$BIN" run "$PROFILE" -d "$DUR" -m "$MULT" -q >"$work/q.out" || true
  read -r c b p < <(figures "$work/q.out" "$work/q.time")
  line quiet "$c" "$b" "$p"; quiet+=("$c $b $p")

  rm -f "$work/w.done"
  tmux -L "$sock" new-session -d -s w -x 120 -y 32 \
    "/usr/bin/time -f '%U %S' -o $work/w.time $BIN run $PROFILE -d $DUR -m $MULT --metrics 127.0.0.1:$PORT --json $work/w.json >$work/w.out; touch $work/w.done"
  while [ ! -e "$work/w.done" ]; do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/metrics" || true
    sleep 1
  done
  read -r c b p < <(figures "$work/w.out" "$work/w.time")
  line watched "$c" "$b" "$p"; watched+=("$c $b $p")
done

python3 - "${quiet[@]}" -- "${watched[@]}" <<'PY'
import json, statistics, sys
args = sys.argv[1:]
cut = args.index("--")
def med(rows, k):
    return statistics.median(float(r.split()[k]) for r in rows)
q, w = args[:cut], args[cut + 1:]
out = {"bench": "operator-cost", "summary": True, "pairs": len(q)}
for k, name in enumerate(["cpu_us_per_flow", "busy_cpu_us_per_flow", "process_cpu_us_per_flow"]):
    a, b = med(q, k), med(w, k)
    out[name] = {"quiet": round(a, 3), "watched": round(b, 3), "cost_pct": round((b - a) / a * 100, 2)}
print(json.dumps(out))
PY
