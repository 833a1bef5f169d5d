#!/usr/bin/env bash
# The lab (T-veth, ../shared/BENCHMARKS.md): two network namespaces joined by a veth pair.
#
#   sq-cli [sq-cli0] <---- veth, MTU 1500 ----> [sq-srv0] sq-srv
#   client 198.18.0.2, client pool 198.18.16.0/24      server 198.18.0.1, W1 server 198.18.48.1
#
# usage: scripts/lab.sh up [veth] [--squall none|client|server|both]   (idempotent: rebuilds from scratch)
#        scripts/lab.sh up dut|dut-nat
#        scripts/lab.sh down     (removes every namespace of either topology)
#        scripts/lab.sh status
#
# T-dut (`up dut`, `up dut-nat`): one Squall process owns a client port and a server port,
# the device under test routes (and with dut-nat also masquerades) between them:
#
#   sq-tg [sq-c0] <-- veth --> [sq-dc0] sq-dut [sq-ds0] <-- veth --> [sq-s0] sq-tg
#   client pool 198.18.16.0/24   198.18.0.1     198.19.0.1     server 198.19.48.1
#
# sq-tg holds both of Squall's interfaces, without addresses (Squall answers ARP for its
# client pool on sq-c0 and for 198.19.48.1 on sq-s0). sq-dut forwards between its two
# interfaces with the pools on-link (it ARPs for each address, Squall answers); Squall
# resolves the DUT's MAC through its gateway addresses (--client-gw 198.18.0.1,
# --server-gw 198.19.0.1). dut-nat adds an nftables masquerade on sq-ds0: the server
# side then sees every flow coming from 198.19.0.1.
#
# An address belongs to the kernel of its namespace when a kernel program (nginx, curl, ab,
# wrk) plays that side, and to Squall otherwise: then the interface of that namespace gets
# NO address (the kernel would answer Squall's SYN-ACKs with RSTs), Squall answers ARP for
# its addresses itself, and the other namespace reaches them on-link (routes `dev`, no
# gateway), so the kernel there ARPs for each address and Squall answers.
#   --squall none   (default) kernel on both sides: client 198.18.0.2 + pool routes,
#                   server 198.18.0.1 and 198.18.48.1.
#   --squall client Squall plays the client in sq-cli (AF_PACKET on sq-cli0, no address);
#                   sq-srv: 198.18.0.1/24 and 198.18.48.1/32 on sq-srv0, pool on-link.
#   --squall server Squall plays the server in sq-srv (AF_PACKET on sq-srv0, no address);
#                   sq-cli: 198.18.0.2/24 on sq-cli0, 198.18.48.0/24 on-link.
#   --squall both   Squall plays both sides (or raw frames cross the veth): no address
#                   on either interface, both up (each Squall is told its peer's MAC).
#
# Offloads: a veth hands the peer's frames over as the sender's skbs. With TSO/GSO on, the
# kernel side sends 64 KiB TCP super-frames that an AF_PACKET socket on the other end sees
# as one oversized frame; with tx checksum offload on, the frames carry only a partial
# (pseudo-header) checksum (CHECKSUM_PARTIAL) that Squall, which verifies checksums,
# would drop; GRO/rx offloads would merge frames before AF_PACKET sees them. So every
# offload is turned off on both ends (ethtool -K ... tso off gso off gro off tx off rx off):
# what AF_PACKET sees is then exactly what a real wire would carry.
#
# The kernel of Squall's namespace has no address on Squall's interface, so it would only
# look every received frame up in its routing table and drop it (a route miss, a dst
# allocated and freed per frame, on whichever core received the frame). The lab keeps it
# out: a netdev ingress chain (nftables) drops every frame after the packet taps have seen
# it (AF_PACKET's ring or socket, tcpdump) and before the kernel's IP stack would.
# `SQUALL_LAB_KERNEL_OUT=0 scripts/lab.sh up ...` leaves the kernel in (for comparisons).
# `SQUALL_LAB_SERVER_OFFLOADS=1 scripts/lab.sh up ...` gives the server end (sq-srv0) back
# its transmit offloads as a veth has them by default (tx checksum, TSO, GSO; receive and
# the client end stay off): nginx's kernel and Squall's AF_PACKET GSO then hand a burst
# of segments to the client's kernel as one super-packet, as a NIC's TSO would put it on
# the wire and the client's GRO take it. A Squall client on sq-cli0 then needs
# `afpacket:sq-cli0,superframes` (it receives each super-packet as one frame).
# `SQUALL_LAB_CLIENT_CSUM=1 scripts/lab.sh up ...` turns the client end's transmit checksum
# offload back on (a veth's default): the client's kernel then sends its TCP frames with
# the checksum left to the offload (only the pseudo-header sum in the field); Squall's
# AF_PACKET ring receive takes the kernel's word for such frames (TP_STATUS_CSUMNOTREADY).
# `SQUALL_LAB_INITCWND=N scripts/lab.sh up` gives the kernel server (nginx) the TCP initial
# window N on its routes to the client (`squall-bench veth --initcwnd N`).
#
# AF_XDP (`--iface afxdp:sq-cli0` / `afxdp:sq-srv0`) uses the same lab: Squall loads its own
# XDP program on its interface (native veth XDP) and binds in copy mode (veth has no
# zero-copy). The offloads must be off for the same reasons. The peer needs no XDP program:
# that is only needed for frames an XDP program pushes into a veth with XDP_TX/REDIRECT,
# while an AF_XDP socket in copy mode transmits ordinary skbs. With AF_XDP the kernel of
# Squall's namespace could keep addresses of its own on the interface (its traffic is
# passed to it); the lab gives it none, as for AF_PACKET.
set -euo pipefail

CLI=sq-cli
SRV=sq-srv
CIF=sq-cli0
SIF=sq-srv0
TG=sq-tg
DUT=sq-dut

need() { command -v "$1" >/dev/null || { echo "lab.sh: '$1' not found (apt-get install $2)" >&2; exit 2; }; }

down() {
    local n
    for n in "$CLI" "$SRV" "$TG" "$DUT"; do
        ip netns del "$n" 2>/dev/null || true
    done
    # A veth whose peer namespace vanished is deleted with it; this catches a half-built one.
    ip link del "$CIF" 2>/dev/null || true
}

# A namespace with lo up and IPv6 off.
ns_new() {
    ip netns add "$1"
    ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip netns exec "$1" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
    ip netns exec "$1" ip link set lo up
}

# A veth pair $2 (in $1) <-> $4 (in $3), MTU 1500, offloads off, both up.
veth_pair() {
    ip link add "$2" netns "$1" type veth peer name "$4" netns "$3"
    ip -n "$1" link set "$2" mtu 1500
    ip -n "$3" link set "$4" mtu 1500
    offloads_off "$1" "$2"
    offloads_off "$3" "$4"
    ip -n "$1" link set "$2" up
    ip -n "$3" link set "$4" up
}

up_dut() {
    local nat=$1
    [ "$(id -u)" = 0 ] || { echo "lab.sh: needs root" >&2; exit 2; }
    need ip iproute2
    need ethtool ethtool
    [ "$nat" = 1 ] && need nft nftables
    down
    trap 'echo "lab.sh: setup failed, cleaning up" >&2; down' ERR
    ns_new "$TG"
    ns_new "$DUT"
    veth_pair "$TG" sq-c0 "$DUT" sq-dc0
    veth_pair "$TG" sq-s0 "$DUT" sq-ds0
    ip -n "$DUT" addr add 198.18.0.1/24 dev sq-dc0
    ip -n "$DUT" addr add 198.19.0.1/24 dev sq-ds0
    ip -n "$DUT" route add 198.18.16.0/24 dev sq-dc0
    ip -n "$DUT" route add 198.19.48.0/24 dev sq-ds0
    ip netns exec "$DUT" sysctl -qw net.ipv4.ip_forward=1
    for i in all default sq-dc0 sq-ds0; do
        ip netns exec "$DUT" sysctl -qw "net.ipv4.conf.$i.rp_filter=0"
    done
    if [ "$nat" = 1 ]; then
        ip netns exec "$DUT" nft -f - <<'NFT'
table ip sq_nat {
    chain postrouting {
        type nat hook postrouting priority srcnat; policy accept;
        oifname "sq-ds0" masquerade
    }
}
NFT
    fi
    trap - ERR
    echo "lab up (T-dut$([ "$nat" = 1 ] && echo ", NAT"): Squall on sq-c0 and sq-s0 in $TG)"
}

# Keeps the kernel of namespace $1 out of interface $2's received frames: a netdev
# ingress chain drops every frame after the packet taps (AF_PACKET) have seen it and
# before the kernel's IP stack would look it up (and drop it: no address, no route).
kernel_out() {
    need nft nftables
    ip netns exec "$1" nft -f - <<NFT
table netdev squall_lab {
    chain in {
        type filter hook ingress device "$2" priority 0; policy drop;
    }
}
NFT
}

offloads_off() {
    ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off rx off >/dev/null 2>&1 ||
        ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off rx off
}

up() {
    local squall=none
    case "${1:-}" in
        dut) up_dut 0; return ;;
        dut-nat) up_dut 1; return ;;
        veth) shift ;;
    esac
    while [ $# -gt 0 ]; do
        case "$1" in
            --squall) squall="${2:-}"; shift 2 ;;
            *) echo "lab.sh: unknown option $1" >&2; exit 2 ;;
        esac
    done
    case "$squall" in none|client|server|both) ;; *) echo "lab.sh: --squall none|client|server|both" >&2; exit 2 ;; esac
    [ "$(id -u)" = 0 ] || { echo "lab.sh: needs root" >&2; exit 2; }
    need ip iproute2
    need ethtool ethtool
    down
    trap 'echo "lab.sh: setup failed, cleaning up" >&2; down' ERR
    ip netns add "$CLI"
    ip netns add "$SRV"
    ip link add "$CIF" netns "$CLI" type veth peer name "$SIF" netns "$SRV"
    for ns in "$CLI" "$SRV"; do
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
        ip netns exec "$ns" ip link set lo up
    done
    ip -n "$CLI" link set "$CIF" mtu 1500
    ip -n "$SRV" link set "$SIF" mtu 1500
    offloads_off "$CLI" "$CIF"
    offloads_off "$SRV" "$SIF"
    if [ "${SQUALL_LAB_CLIENT_CSUM:-0}" = 1 ]; then
        # The client end leaves its transmit checksums to the offload (see the header).
        ip netns exec "$CLI" ethtool -K "$CIF" tx on >/dev/null
    fi
    if [ "${SQUALL_LAB_SERVER_OFFLOADS:-0}" = 1 ]; then
        # The server end transmits with a veth's default offloads (see the header).
        ip netns exec "$SRV" ethtool -K "$SIF" tx on tso on gso on >/dev/null
    fi
    case "$squall" in
        none)
            ip -n "$CLI" addr add 198.18.0.2/24 dev "$CIF"
            ip -n "$SRV" addr add 198.18.0.1/24 dev "$SIF"
            ip -n "$SRV" addr add 198.18.48.1/32 dev lo
            ip -n "$CLI" link set "$CIF" up
            ip -n "$SRV" link set "$SIF" up
            # The client pool lives in sq-cli (on lo, so that kernel clients can bind it).
            ip -n "$CLI" addr add 198.18.16.0/24 dev lo
            ip -n "$CLI" route add 198.18.48.0/24 via 198.18.0.1
            ip -n "$SRV" route add 198.18.16.0/24 via 198.18.0.2
            if [ -n "${SQUALL_LAB_INITCWND:-}" ]; then
                # The kernel server's initial window (nginx's knob: the route's initcwnd).
                ip -n "$SRV" route change 198.18.0.0/24 dev "$SIF" proto kernel scope link \
                    src 198.18.0.1 initcwnd "$SQUALL_LAB_INITCWND"
                ip -n "$SRV" route change 198.18.16.0/24 via 198.18.0.2 \
                    initcwnd "$SQUALL_LAB_INITCWND"
            fi
            ;;
        client)
            ip -n "$SRV" addr add 198.18.0.1/24 dev "$SIF"
            ip -n "$SRV" addr add 198.18.48.1/32 dev "$SIF"
            ip -n "$CLI" link set "$CIF" up
            ip -n "$SRV" link set "$SIF" up
            ip -n "$SRV" route add 198.18.16.0/24 dev "$SIF"
            ;;
        server)
            ip -n "$CLI" addr add 198.18.0.2/24 dev "$CIF"
            ip -n "$CLI" link set "$CIF" up
            ip -n "$SRV" link set "$SIF" up
            ip -n "$CLI" route add 198.18.48.0/24 dev "$CIF"
            ;;
        both)
            ip -n "$CLI" link set "$CIF" up
            ip -n "$SRV" link set "$SIF" up
            ;;
    esac
    if [ "${SQUALL_LAB_KERNEL_OUT:-1}" = 1 ]; then
        case "$squall" in client|both) kernel_out "$CLI" "$CIF" ;; esac
        case "$squall" in server|both) kernel_out "$SRV" "$SIF" ;; esac
    fi
    trap - ERR
    echo "lab up (squall plays: $squall)"
}

status() {
    for ns in "$CLI" "$SRV" "$TG" "$DUT"; do
        echo "== $ns"
        ip -n "$ns" -br addr 2>/dev/null || echo "(absent)"
        ip -n "$ns" route 2>/dev/null || true
    done
}

case "${1:-}" in
    up) shift; up "$@" ;;
    down) down; echo "lab down" ;;
    status) status ;;
    *) echo "usage: $0 up [veth] [--squall none|client|server|both] | up dut|dut-nat | down | status" >&2; exit 2 ;;
esac
