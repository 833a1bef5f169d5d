#!/usr/bin/env bash
# What watching `squall serve` costs its worker, in instructions (callgrind: timing on a
# shared VM says nothing): the worker thread's instructions per request with nothing
# watching (`-q`) and with everything watching (the live view in a tmux pane, --metrics
# scraped every 0.5 s, --json), ab -k sending N requests to /ping in the lab
# (scripts/lab.sh up --squall server). A binary without the reporting (an older build)
# can be given too: it runs with neither option (variant `plain`).
#
# usage (root): scripts/bench-serve-watch.sh SQUALL_BIN [OLD_SQUALL_BIN]
#   env: N (requests, default 20000), REPEAT (runs per variant, default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=${1:?usage: $0 SQUALL_BIN [OLD_SQUALL_BIN]}
OLD=${2:-}
N=${N:-20000}
REPEAT=${REPEAT:-2}
for t in valgrind callgrind_annotate tmux ab curl jq flock; do
    command -v "$t" >/dev/null || { echo "needs $t (scripts/deps.sh test)" >&2; exit 2; }
done
exec 9>/tmp/squall-lab.lock
flock 9
WORK=$(mktemp -d /tmp/squall-serve-watch.XXXXXX)
SOCK="squall-serve-watch-$$"
cleanup() {
    tmux -L "$SOCK" kill-server 2>/dev/null || true
    scripts/lab.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT
scripts/lab.sh up --squall server >/dev/null

# One run: $1 binary, $2 variant (quiet|watched|plain), $3 output directory.
one() {
    local bin=$1 variant=$2 out=$3
    mkdir -p "$out"
    local cmd="ip netns exec sq-srv valgrind --tool=callgrind --separate-threads=yes \
--callgrind-out-file=$out/cg.out $bin serve --listen 198.18.48.1:80 --iface afpacket:sq-srv0 \
--peer-ip 198.18.0.2 --route '/ping return 200 \"pong\"' --duration 40 --drain-sec 1"
    case $variant in
        quiet) bash -c "exec $cmd -q > $out/line.json 2> $out/err.txt" & ;;
        plain) bash -c "exec $cmd > $out/line.json 2> $out/err.txt" & ;;
        watched)
            tmux -L "$SOCK" new-session -d -s live -x 120 -y 32 \
                "$cmd --metrics 127.0.0.1:19466 --json $out/serve.json > $out/line.json; echo done > $out/rc"
            ;;
    esac
    local t0=$SECONDS
    until [ "$(ip netns exec sq-cli curl -s -m 1 http://198.18.48.1/ping)" = pong ]; do
        [ $((SECONDS - t0)) -lt 60 ] || { echo "the server did not come up" >&2; return 1; }
        sleep 0.5
    done
    local scraper=
    if [ "$variant" = watched ]; then
        (while :; do ip netns exec sq-srv curl -s -m 1 http://127.0.0.1:19466/metrics >/dev/null; sleep 0.5; done) &
        scraper=$!
    fi
    ip netns exec sq-cli ab -q -k -n "$N" -c 4 http://198.18.48.1/ping > "$out/ab.txt"
    [ -z "$scraper" ] || { kill "$scraper"; wait "$scraper" 2>/dev/null || true; }
    # Stop at once (the graceful stop): idle polling after the load is not counted in.
    if [ "$variant" = watched ]; then
        sleep 1.5
        tmux -L "$SOCK" capture-pane -p -t live > "$out/pane.txt"
        tmux -L "$SOCK" send-keys -t live q
        until [ -f "$out/rc" ]; do sleep 0.5; done
        tmux -L "$SOCK" kill-server 2>/dev/null || true
    else
        kill -TERM $!
        wait
    fi
    # The worker thread is the one that ran the server app.
    local wf
    wf=$(grep -l "ServeApp" "$out"/cg.out-* | head -1)
    local ir
    ir=$(awk '/^summary:/ {print $2}' "$wf")
    local req
    req=$(jq .requests "$out/line.json")
    printf '%-8s %-40s requests %7d  worker Ir %13d  Ir/request %8.0f\n' \
        "$variant" "$bin" "$req" "$ir" "$(echo "$ir / $req" | bc -l)"
}

for r in $(seq "$REPEAT"); do
    one "$NEW" quiet "$WORK/new-quiet-$r"
    one "$NEW" watched "$WORK/new-watched-$r"
    [ -z "$OLD" ] || one "$OLD" plain "$WORK/old-plain-$r"
done
echo "outputs (callgrind files, panes, results) in $WORK"
