#!/usr/bin/env bash
# Records the example captures in examples/pcaps/ from real programs (curl, nginx, a small
# Python UDP responder) inside a pair of network namespaces joined by a veth pair.
# Addresses: 198.18.200.2 (client) and 198.18.200.1 (server), nothing outside 198.18.0.0/15.
# Needs root, nginx, curl, tcpdump, nft (nftables), editcap (wireshark-common), python3.
# Usage: sudo examples/pcaps/record.sh [OUTDIR]   (default: the folder of this script)
set -euo pipefail

OUT="$(cd "${1:-$(dirname "$0")}" && pwd)"
CLI=sqpy-cli
SRV=sqpy-srv
CIF=sqpyc0
SIF=sqpys0
CIP=198.18.200.2
SIP=198.18.200.1
WORK="$(mktemp -d /tmp/squall-pcaps.XXXXXX)"
chmod 755 "$WORK"
PIDS=()

cleanup() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null || true
    done
    if [ -f "$WORK/nginx.pid" ]; then
        kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
    fi
    sleep 0.3
    ip netns del "$CLI" 2>/dev/null || true
    ip netns del "$SRV" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ip netns add "$CLI"
ip netns add "$SRV"
ip link add "$CIF" type veth peer name "$SIF"
ip link set "$CIF" netns "$CLI"
ip link set "$SIF" netns "$SRV"
ip -n "$CLI" addr add "$CIP/24" dev "$CIF"
ip -n "$SRV" addr add "$SIP/24" dev "$SIF"
for ns_if in "$CLI:$CIF" "$SRV:$SIF"; do
    ns="${ns_if%%:*}"; ifc="${ns_if##*:}"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$ifc" up mtu 1500
    # MTU-sized segments on the wire, as a NIC would send them
    ip netns exec "$ns" ethtool -K "$ifc" tso off gso off gro off >/dev/null 2>&1 || true
done

# --- content served by nginx (deterministic, so tests can check the reassembled bytes) ---
mkdir -p "$WORK/www"
python3 - "$WORK/www" <<'PY'
import sys, pathlib
root = pathlib.Path(sys.argv[1])
def body(n: int, seed: str) -> bytes:
    line = ("squall example payload " + seed + " ").encode()
    out = bytearray()
    i = 0
    while len(out) < n:
        out += b"%06d " % i + line + b"\n"
        i += 1
    return bytes(out[:n])
(root / "hello.html").write_bytes(body(2000, "hello"))
(root / "page20k.html").write_bytes(body(20000, "page20k"))
PY
chmod -R a+rX "$WORK/www"

cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon on;
pid $WORK/nginx.pid;
error_log $WORK/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $WORK/tmp_body;
    proxy_temp_path $WORK/tmp_proxy;
    fastcgi_temp_path $WORK/tmp_fcgi;
    uwsgi_temp_path $WORK/tmp_uwsgi;
    scgi_temp_path $WORK/tmp_scgi;
    default_type text/html;
    server_tokens off;
    server {
        listen $SIP:80;
        root $WORK/www;
    }
}
CONF
ip netns exec "$SRV" nginx -c "$WORK/nginx.conf"
sleep 0.3

capture() { # capture FILE FILTER -- starts tcpdump in the client namespace
    ip netns exec "$CLI" tcpdump -i "$CIF" -s 0 -U --immediate-mode -w "$1" "$2" 2>>"$WORK/tcpdump.log" &
    PIDS+=($!)
    sleep 1
}
stop_capture() {
    sleep 0.5
    local p="${PIDS[-1]}"
    kill -INT "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
    unset 'PIDS[-1]'
}

# 1. curl -> nginx, HTTP/1.1 GET of a 2,000-byte file
capture "$WORK/http_get.pcap" "tcp port 80"
ip netns exec "$CLI" curl -s -o /dev/null --http1.1 "http://$SIP/hello.html"
stop_capture

# 2. the same with a 20,000-byte file over a lossy link. nftables drops packets at random in
#    each namespace's prerouting hook, i.e. AFTER tcpdump (an AF_PACKET tap) has seen them on
#    the client side: the capture holds the dropped segment, later segments (out of order for
#    the receiver) and the sender's retransmission (a duplicate in the capture).
#    The seed-free numgen makes every recording different; the tests only rely on content.
ip netns exec "$CLI" nft -f - <<NFT
table inet sqloss {
    chain pre { type filter hook prerouting priority 0; tcp sport 80 tcp flags & (syn|fin) == 0 numgen random mod 100 < 12 drop; }
}
NFT
ip netns exec "$SRV" nft -f - <<NFT
table inet sqloss {
    chain pre { type filter hook prerouting priority 0; tcp dport 80 tcp flags & (syn|fin) == 0 numgen random mod 100 < 10 drop; }
}
NFT
capture "$WORK/http_lossy.pcap" "tcp port 80"
ip netns exec "$CLI" curl -s -o "$WORK/lossy.out" --http1.1 --max-time 60 "http://$SIP/page20k.html"
stop_capture
cmp "$WORK/lossy.out" "$WORK/www/page20k.html"
ip netns exec "$CLI" nft delete table inet sqloss
ip netns exec "$SRV" nft delete table inet sqloss

# 3. a DNS-like exchange over UDP: two queries from one socket, one answer each
cat > "$WORK/udp_srv.py" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
for _ in range(2):
    q, peer = s.recvfrom(2048)
    qid, = struct.unpack("!H", q[:2])
    question = q[12:]
    qtype = struct.unpack("!H", question[-4:-2])[0]
    if qtype == 1:   # A
        rdata = socket.inet_aton("198.18.200.80"); rr_type = 1
    else:            # TXT
        txt = b"squall example answer"; rdata = bytes([len(txt)]) + txt; rr_type = 16
    hdr = struct.pack("!HHHHHH", qid, 0x8180, 1, 1, 0, 0)
    rr = b"\xc0\x0c" + struct.pack("!HHIH", rr_type, 1, 300, len(rdata)) + rdata
    s.sendto(hdr + question + rr, peer)
PY
cat > "$WORK/udp_cli.py" <<'PY'
import socket, struct, sys
def query(qid: int, name: str, qtype: int) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + labels + struct.pack("!HH", qtype, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.bind((sys.argv[2], 40053))
for qid, qtype in ((0x5a01, 1), (0x5a02, 16)):
    s.sendto(query(qid, "www.example.test", qtype), (sys.argv[1], 53))
    s.recvfrom(2048)
PY
ip netns exec "$SRV" python3 "$WORK/udp_srv.py" "$SIP" &
PIDS+=($!)
sleep 0.5
capture "$WORK/dns_udp.pcap" "udp port 53"
ip netns exec "$CLI" python3 "$WORK/udp_cli.py" "$SIP" "$CIP"
stop_capture
wait "${PIDS[-1]}" 2>/dev/null || true
unset 'PIDS[-1]'

# pcapng flavour for the UDP capture (the converter reads both formats)
editcap -F pcapng "$WORK/dns_udp.pcap" "$WORK/dns_udp.pcapng"

cat "$WORK/tcpdump.log"
cp "$WORK/http_get.pcap" "$WORK/http_lossy.pcap" "$WORK/dns_udp.pcapng" "$OUT/"
echo "wrote: $OUT/http_get.pcap $OUT/http_lossy.pcap $OUT/dns_udp.pcapng"
