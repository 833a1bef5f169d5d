"""scapy builds packets (random fields, TCP options, IP options, VLAN,
fragments, bad checksums); squall-wire parses them; every field must equal
scapy's own reading of the same bytes."""

import os
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wire_helpers import recomputed, scapy_tcp_options  # noqa: E402

# WIRE_SEED=<n> explores other random packets than the fixed default.
N_RANDOM = 400


def rand_mac(r):
    b = [r.randrange(256) for _ in range(6)]
    return ":".join(f"{x:02x}" for x in b)


def rand_ip(r):
    return ".".join(str(r.randrange(256)) for _ in range(4))


def rand_tcp_options(r):
    """A random option list whose encoding fits in 40 bytes."""
    pool = [
        (4, lambda: ("MSS", r.randrange(65536))),
        (3, lambda: ("WScale", r.randrange(256))),
        (2, lambda: ("SAckOK", b"")),
        (10, lambda: ("Timestamp", (r.randrange(2**32), r.randrange(2**32)))),
        (1, lambda: ("NOP", None)),
        (None, None),  # SACK, sized below
        (None, None),  # unknown kind
    ]
    opts, size = [], 0
    for _ in range(r.randrange(0, 8)):
        i = r.randrange(len(pool))
        if i == 5:
            n = r.randint(1, 4)
            length = 2 + 8 * n
            opt = ("SAck", tuple(r.randrange(2**32) for _ in range(2 * n)))
        elif i == 6:
            # kinds neither scapy nor tshark dissect (tshark stops at a bad
            # MPTCP (30) or experimental (253/254) option), so all three
            # implementations treat them as opaque kind/length/data
            kind = r.choice([77, 100, 200, 222])
            data = bytes(r.randrange(256) for _ in range(r.randrange(0, 6)))
            length = 2 + len(data)
            opt = (kind, data)
        else:
            length, make = pool[i]
            opt = make()
        if size + length > 40:
            break
        opts.append(opt)
        size += length
    if size < 40 and r.random() < 0.2:
        opts.append(("EOL", None))
    return opts


def rand_ip_options(r, s):
    c = r.randrange(5)
    if c == 0:
        return [s.IPOption_Router_Alert()]
    if c == 1:
        return [s.IPOption_NOP(), s.IPOption_RR(routers=[rand_ip(r) for _ in range(r.randint(1, 4))])]
    if c == 2:
        return [s.IPOption_NOP(), s.IPOption_NOP(), s.IPOption_NOP(), s.IPOption_EOL()]
    return []


def random_packet(r, s):
    eth = s.Ether(src=rand_mac(r), dst=rand_mac(r))
    if r.random() < 0.3:
        eth = eth / s.Dot1Q(prio=r.randrange(8), dei=r.randrange(2), vlan=r.randrange(4096))
    kind = r.choice(["tcp", "tcp", "tcp", "udp", "icmp", "arp"])
    if kind == "arp":
        return eth / s.ARP(
            op=r.choice([1, 2]),
            hwsrc=rand_mac(r),
            psrc=rand_ip(r),
            hwdst=rand_mac(r),
            pdst=rand_ip(r),
        )
    ip = s.IP(
        src=rand_ip(r),
        dst=rand_ip(r),
        tos=r.randrange(256),
        id=r.randrange(65536),
        ttl=r.randrange(256),
        flags=r.choice([0, 2, 2, 2, 1]),
        frag=r.choice([0] * 8 + [r.randrange(8192)]),
    )
    if r.random() < 0.3:
        ip.options = rand_ip_options(r, s)
    payload = bytes(r.randrange(256) for _ in range(r.choice([0, 1, 2, 7, 64, r.randrange(1400)])))
    if kind == "tcp":
        l4 = s.TCP(
            sport=r.randrange(65536),
            dport=r.randrange(65536),
            seq=r.randrange(2**32),
            ack=r.randrange(2**32),
            flags=r.randrange(512),
            window=r.randrange(65536),
            urgptr=r.randrange(65536),
            options=rand_tcp_options(r),
        )
    elif kind == "udp":
        l4 = s.UDP(sport=r.randrange(65536), dport=r.randrange(65536))
        if r.random() < 0.2:
            l4.chksum = 0
    else:
        l4 = s.ICMP(type=r.choice([0, 8]), id=r.randrange(65536), seq=r.randrange(65536))
    pkt = eth / ip / l4 / s.Raw(payload)
    # corrupt one checksum now and then (never UDP's: 0 would mean "none")
    if r.random() < 0.15:
        layer = r.choice([s.IP, l4.__class__])
        raw = s.Ether(bytes(pkt))
        if layer not in raw:  # a fragment: scapy does not decode L4
            layer = s.IP
        good = raw[layer].chksum
        pkt[layer].chksum = (good + 1 + r.randrange(0xfffe)) & 0xFFFF
        if layer is s.UDP and pkt[layer].chksum == 0:
            pkt[layer].chksum = 1
    return pkt


def check_frame(s, frame, got):
    p = s.Ether(frame)
    assert got["eth"]["src"] == p.src
    assert got["eth"]["dst"] == p.dst
    if s.Dot1Q in p:
        q = p[s.Dot1Q]
        assert got["eth"]["vlan"] == {"pcp": q.prio, "dei": bool(q.dei), "vid": q.vlan}
        assert got["eth"]["header_len"] == 18
    else:
        assert got["eth"]["vlan"] is None
        assert got["eth"]["header_len"] == 14
    assert "error" not in got, got
    if s.ARP in p:
        a = p[s.ARP]
        assert got["arp"] == {"op": a.op, "sha": a.hwsrc, "spa": a.psrc, "tha": a.hwdst, "tpa": a.pdst}
        return
    ip = p[s.IP]
    gi = got["ipv4"]
    assert gi["version"] == ip.version
    assert gi["ihl"] == ip.ihl
    assert gi["tos"] == ip.tos
    assert gi["total_len"] == ip.len
    assert gi["ident"] == ip.id
    assert gi["df"] == bool(ip.flags.DF)
    assert gi["mf"] == bool(ip.flags.MF)
    assert gi["frag"] == ip.frag
    assert gi["ttl"] == ip.ttl
    assert gi["proto"] == ip.proto
    assert gi["src"] == ip.src and gi["dst"] == ip.dst
    assert gi["checksum"] == ip.chksum
    ip_ok = ip.chksum == recomputed(s, frame, s.IP)
    assert gi["checksum_ok"] == ip_ok
    raw_ip = bytes(p[s.IP])
    assert gi["options"] == raw_ip[20 : ip.ihl * 4].hex()
    if ip.flags.MF or ip.frag:
        assert got.get("fragment") is True
        return
    l4_ok = True
    if s.TCP in p:
        t = p[s.TCP]
        gt = got["tcp"]
        assert (gt["sport"], gt["dport"], gt["seq"], gt["ack"]) == (t.sport, t.dport, t.seq, t.ack)
        assert gt["dataofs"] == t.dataofs
        assert gt["flags"] == int(t.flags)
        assert gt["window"] == t.window and gt["urgptr"] == t.urgptr
        assert gt["checksum"] == t.chksum
        l4_ok = t.chksum == recomputed(s, frame, s.TCP)
        assert gt["checksum_ok"] == l4_ok
        assert gt["options"] == scapy_tcp_options(t.options)
        assert gt["payload_len"] == len(t.payload)
    elif s.UDP in p:
        u = p[s.UDP]
        gu = got["udp"]
        assert (gu["sport"], gu["dport"], gu["len"], gu["checksum"]) == (u.sport, u.dport, u.len, u.chksum)
        l4_ok = u.chksum == 0 or u.chksum == recomputed(s, frame, s.UDP)
        assert gu["checksum_ok"] == l4_ok
        assert gu["payload_len"] == len(u.payload)
    elif s.ICMP in p:
        c = p[s.ICMP]
        gc = got["icmp"]
        assert (gc["type"], gc["code"], gc["id"], gc["seq"]) == (c.type, c.code, c.id, c.seq)
        assert gc["checksum"] == c.chksum
        l4_ok = c.chksum == recomputed(s, frame, s.ICMP)
        assert gc["checksum_ok"] == l4_ok
        assert gc["payload_len"] == len(c.payload)
    assert got["checksums_ok"] == (ip_ok and l4_ok)


def test_random_scapy_packets_parse_identically(scapy, wirecheck_parse):
    r = random.Random(int(os.environ.get("WIRE_SEED", "20261122")))
    frames = [bytes(random_packet(r, scapy)) for _ in range(N_RANDOM)]
    results = wirecheck_parse(frames)
    kinds = {}
    for frame, got in zip(frames, results):
        check_frame(scapy, frame, got)
        for k in ("tcp", "udp", "icmp", "arp"):
            if k in got:
                kinds[k] = kinds.get(k, 0) + 1
    # the generator really covered every kind
    assert all(kinds.get(k, 0) >= 20 for k in ("tcp", "udp", "icmp", "arp")), kinds


def test_all_option_kinds_covered(scapy, wirecheck_parse):
    s = scapy
    opts = [
        ("MSS", 1460),
        ("SAckOK", b""),
        ("Timestamp", (0xFFFFFFFF, 1)),
        ("NOP", None),
        ("WScale", 14),
        ("SAck", (1, 2, 3, 4)),
        ("EOL", None),
    ]
    frame = bytes(s.Ether() / s.IP(src="198.18.0.1", dst="198.18.0.2") / s.TCP(flags="SA", options=opts))
    got = wirecheck_parse([frame])[0]
    check_frame(s, frame, got)
    kinds = [o["kind"] for o in got["tcp"]["options"]]
    for k in ("mss", "sackok", "ts", "nop", "wscale", "sack", "eol"):
        assert k in kinds
    assert got["checksums_ok"]


@pytest.mark.parametrize("seed", range(3))
def test_truncated_and_garbled_frames_give_errors_not_crashes(scapy, wirecheck_parse, seed):
    r = random.Random(seed)
    frames = []
    for _ in range(150):
        f = bytearray(bytes(random_packet(r, scapy)))
        if r.random() < 0.5:
            f = f[: r.randrange(len(f) + 1)]
        else:
            for _ in range(r.randint(1, 6)):
                f[r.randrange(len(f))] = r.randrange(256)
        frames.append(bytes(f))
    results = wirecheck_parse(frames)
    for f, got in zip(frames, results):
        assert got["len"] == len(f)
        if len(f) < 14:
            assert got["error"] == "Truncated"
        if "error" in got:
            assert got["error"] in ("Truncated", "Malformed", "Unsupported")
