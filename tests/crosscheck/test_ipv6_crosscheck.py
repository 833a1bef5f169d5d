"""IPv6 both ways, like the IPv4 formats: squall-wire's IPv6 frames (`wirecheck
build`: TCP with and without extension headers, UDP, ICMPv6 echo, neighbour
solicitation/advertisement, router advertisement, packet too big) read back by
scapy and tshark with good checksums and no malformed packets; random scapy-built
IPv6 packets (extension-header chains, fragments, ICMPv6, bad checksums) parsed by
squall-wire field for field as scapy and tshark read them."""

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_scapy_to_squall import rand_mac, rand_tcp_options  # noqa: E402
from wire_helpers import scapy_tcp_options  # noqa: E402

IPV6_KINDS = ("tcp6", "udp6", "icmpv6")
N_RANDOM = 400


def recomputed6(s, frame, layer):
    """The checksum scapy's in6_chksum computes over the received bytes of `layer`
    (TCP, UDP or an ICMPv6 class) with its checksum field zeroed (no re-encoding:
    scapy would rebuild an invoking packet inside packet-too-big differently)."""
    p = s.Ether(frame)
    raw = bytearray(bytes(p[layer]))
    at, nh = (16, 6) if layer is s.TCP else (6, 17) if layer is s.UDP else (2, 58)
    raw[at : at + 2] = b"\0\0"
    c = s.in6_chksum(nh, p[layer].underlayer, bytes(raw))
    if layer is s.UDP and c == 0:
        c = 0xFFFF
    return c


def icmpv6_layer(s, p):
    for cls in (s.ICMPv6EchoRequest, s.ICMPv6EchoReply, s.ICMPv6ND_NS, s.ICMPv6ND_NA,
                s.ICMPv6ND_RA, s.ICMPv6PacketTooBig):
        if cls in p:
            return cls
    return None


# ------------------------------------------------------------ squall -> scapy/tshark


def test_build_covers_ipv6_kinds(built_pcap):
    _, desc = built_pcap
    names = {d["name"] for d in desc}
    for n in ("tcp6_syn", "tcp6_data_ext_headers", "udp6_0", "udp6_1", "icmp6_echo_request",
              "icmp6_echo_reply", "icmp6_ns", "icmp6_na", "icmp6_ra", "icmp6_packet_too_big"):
        assert n in names


def test_scapy_reads_our_ipv6_frames(scapy, built_pcap):
    s = scapy
    path, desc = built_pcap
    pkts = s.rdpcap(str(path))
    checked = 0
    for p, d in zip(pkts, desc):
        if d["kind"] not in IPV6_KINDS:
            continue
        frame, name = bytes(p), d["name"]
        ip = p[s.IPv6]
        assert ip.plen == len(bytes(ip)) - 40, name
        assert ip.fl == 0xBEEF, name
        if d["kind"] == "tcp6":
            assert (ip.src, ip.dst) == (d["src"], d["dst"]), name
            t = p[s.TCP]
            assert (t.sport, t.dport, t.seq, t.ack) == (d["sport"], d["dport"], d["seq"], d["ack"]), name
            assert int(t.flags) == d["flags"] and t.window == d["window"], name
            assert t.chksum == recomputed6(s, frame, s.TCP), name
            assert len(t.payload) == d["payload_len"], name
            if d["ext_len"]:
                assert s.IPv6ExtHdrHopByHop in p and s.IPv6ExtHdrDestOpt in p, name
            if t.flags.S:
                assert {"kind": "mss", "value": 1440} in scapy_tcp_options(t.options), name
        elif d["kind"] == "udp6":
            u = p[s.UDP]
            assert (u.sport, u.dport, u.len) == (d["sport"], d["dport"], d["len"]), name
            assert u.chksum != 0 and u.chksum == recomputed6(s, frame, s.UDP), name
        else:
            assert (ip.src, ip.dst, ip.hlim) == (d["src"], d["dst"], d["hlim"]), name
            cls = icmpv6_layer(s, p)
            assert cls is not None, name
            c = p[cls]
            assert (c.type, c.code) == (d["type"], d["code"]), name
            assert c.cksum == recomputed6(s, frame, cls), name
            if cls in (s.ICMPv6EchoRequest, s.ICMPv6EchoReply):
                assert (c.id, c.seq, len(c.data)) == (d["id"], d["seq"], d["payload_len"]), name
            elif cls is s.ICMPv6ND_NS:
                assert c.tgt == d["ndp"]["target"], name
                assert p[s.ICMPv6NDOptSrcLLAddr].lladdr == d["ndp"]["lladdr"], name
            elif cls is s.ICMPv6ND_NA:
                n = d["ndp"]
                assert c.tgt == n["target"], name
                assert (bool(c.R), bool(c.S), bool(c.O)) == (n["router"], n["solicited"], n["override"]), name
                assert p[s.ICMPv6NDOptDstLLAddr].lladdr == n["lladdr"], name
            elif cls is s.ICMPv6ND_RA:
                n = d["ndp"]
                assert (c.chlim, c.routerlifetime) == (n["chlim"], n["routerlifetime"]), name
                assert (c.reachabletime, c.retranstimer) == (n["reachabletime"], n["retranstimer"]), name
                assert p[s.ICMPv6NDOptSrcLLAddr].lladdr == n["lladdr"], name
                assert p[s.ICMPv6NDOptMTU].mtu == n["mtu"], name
                pi = p[s.ICMPv6NDOptPrefixInfo]
                assert (pi.prefix, pi.prefixlen) == (n["prefix"], n["prefixlen"]), name
                assert pi.L == 1 and pi.A == 1, name
            else:
                assert c.mtu == d["mtu"], name
                assert len(bytes(c.payload)) == d["payload_len"], name
        checked += 1
    assert checked == 10


def test_tshark_reads_our_ipv6_frames(tshark, built_pcap):
    path, desc = built_pcap
    fields = ["ipv6.plen", "ipv6.hlim", "ipv6.src", "ipv6.dst", "tcp.srcport",
              "tcp.options.mss_val", "tcp.checksum.status", "udp.checksum.status",
              "icmpv6.type", "icmpv6.checksum.status", "icmpv6.nd.ns.target_address",
              "icmpv6.nd.na.target_address", "icmpv6.opt.linkaddr", "icmpv6.mtu",
              "icmpv6.nd.ra.router_lifetime", "icmpv6.opt.prefix", "_ws.malformed"]
    cmd = [tshark, "-r", str(path), "-o", "tcp.check_checksum:TRUE",
           "-o", "udp.check_checksum:TRUE", "-T", "fields", "-E", "separator=|",
           "-E", "occurrence=a"]
    for f in fields:
        cmd += ["-e", f]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [dict(zip(fields, line.split("|"))) for line in proc.stdout.splitlines()]
    assert len(rows) == len(desc)
    seen = 0
    for t, d in zip(rows, desc):
        if d["kind"] not in IPV6_KINDS:
            continue
        seen += 1
        name = d["name"]
        assert t["_ws.malformed"] == "", name
        if d["kind"] == "tcp6":
            assert (t["ipv6.src"], t["ipv6.dst"]) == (d["src"], d["dst"]), name
            assert int(t["tcp.srcport"]) == d["sport"], name
            assert t["tcp.checksum.status"] == "1", name
            if d["flags"] & 2:
                assert t["tcp.options.mss_val"] == "1440", name
        elif d["kind"] == "udp6":
            assert t["udp.checksum.status"] == "1", name
        else:
            assert int(t["icmpv6.type"]) == d["type"], name
            assert t["icmpv6.checksum.status"] == "1", name
            assert int(t["ipv6.hlim"]) == d["hlim"], name
            n = d.get("ndp", {})
            if d["type"] == 135:
                assert t["icmpv6.nd.ns.target_address"] == n["target"], name
                assert t["icmpv6.opt.linkaddr"] == n["lladdr"], name
            elif d["type"] == 136:
                assert t["icmpv6.nd.na.target_address"] == n["target"], name
                assert t["icmpv6.opt.linkaddr"] == n["lladdr"], name
            elif d["type"] == 134:
                assert int(t["icmpv6.nd.ra.router_lifetime"]) == n["routerlifetime"], name
                assert t["icmpv6.opt.prefix"] == n["prefix"], name
                assert t["icmpv6.opt.linkaddr"] == n["lladdr"], name
            elif d["type"] == 2:
                assert int(t["icmpv6.mtu"]) == d["mtu"], name
    assert seen == 10
    # and nothing in the whole capture is malformed
    out = subprocess.run([tshark, "-r", str(path), "-V"], capture_output=True, text=True,
                         timeout=120).stdout
    assert "Malformed" not in out


# ------------------------------------------------------------ scapy -> squall


def rand_ip6(r):
    # mostly the documentation range, now and then anything
    if r.random() < 0.8:
        return f"2001:db8:{r.randrange(65536):x}::{r.randrange(65536):x}"
    return ":".join(f"{r.randrange(65536):x}" for _ in range(8))


def rand_ext_headers(r, s):
    """A random chain of extension headers and what squall-wire must make of it:
    (layers, expect) where expect is "ok", "fragment" or "Unsupported"."""
    layers, expect = [], "ok"
    if r.random() < 0.25:
        opts = r.choice([[s.RouterAlert()], [s.PadN(optdata=b"\0" * r.randrange(6))], []])
        if r.random() < 0.15:
            # an unknown option whose action bits say discard
            opts = [s.HBHOptUnknown(otype=r.choice([0x5E, 0x9E, 0xDE]), optdata=b"ab")]
            expect = "Unsupported"
        layers.append(s.IPv6ExtHdrHopByHop(options=opts))
    for _ in range(r.randrange(3)):
        k = r.randrange(3)
        if k == 0:
            opts = [s.PadN(optdata=b"\0" * r.randrange(10))]
            if r.random() < 0.3:
                # unknown, action "skip": must be skipped
                opts.append(s.HBHOptUnknown(otype=0x1E, optdata=b"xyz"))
            layers.append(s.IPv6ExtHdrDestOpt(options=opts))
        elif k == 1:
            layers.append(s.IPv6ExtHdrRouting(addresses=[], segleft=0))
        else:
            off = r.choice([0, 0, 0, r.randrange(1, 8192)])
            m = r.choice([0, 0, 1])
            layers.append(s.IPv6ExtHdrFragment(offset=off, m=m, id=r.randrange(2**32)))
            if (off or m) and expect == "ok":
                expect = "fragment"
            if off or m:
                break
    return layers, expect


def random_ipv6_packet(r, s):
    eth = s.Ether(src=rand_mac(r), dst=rand_mac(r))
    if r.random() < 0.3:
        eth = eth / s.Dot1Q(prio=r.randrange(8), vlan=r.randrange(4096))
    ip = s.IPv6(src=rand_ip6(r), dst=rand_ip6(r), hlim=r.randrange(256),
                tc=r.randrange(256), fl=r.randrange(1 << 20))
    ext, expect = rand_ext_headers(r, s)
    payload = bytes(r.randrange(256) for _ in range(r.choice([0, 1, 7, 64, r.randrange(1200)])))
    kind = r.choice(["tcp", "tcp", "udp", "echo", "ns", "na", "ra", "ptb"])
    if kind == "tcp":
        l4 = s.TCP(sport=r.randrange(65536), dport=r.randrange(65536), seq=r.randrange(2**32),
                   ack=r.randrange(2**32), flags=r.randrange(512), window=r.randrange(65536),
                   options=rand_tcp_options(r)) / s.Raw(payload)
    elif kind == "udp":
        l4 = s.UDP(sport=r.randrange(65536), dport=r.choice([5001, 40000])) / s.Raw(payload)
    elif kind == "echo":
        cls = r.choice([s.ICMPv6EchoRequest, s.ICMPv6EchoReply])
        l4 = cls(id=r.randrange(65536), seq=r.randrange(65536), data=payload)
    elif kind == "ns":
        l4 = s.ICMPv6ND_NS(tgt=rand_ip6(r)) / s.ICMPv6NDOptSrcLLAddr(lladdr=rand_mac(r))
    elif kind == "na":
        l4 = s.ICMPv6ND_NA(tgt=rand_ip6(r), R=r.randrange(2), S=r.randrange(2),
                           O=r.randrange(2)) / s.ICMPv6NDOptDstLLAddr(lladdr=rand_mac(r))
    elif kind == "ra":
        l4 = (s.ICMPv6ND_RA(chlim=r.randrange(256), routerlifetime=r.randrange(65536))
              / s.ICMPv6NDOptSrcLLAddr(lladdr=rand_mac(r)) / s.ICMPv6NDOptMTU(mtu=r.randrange(2**32))
              / s.ICMPv6NDOptPrefixInfo(prefix="2001:db8:1::", prefixlen=64))
    else:
        l4 = s.ICMPv6PacketTooBig(mtu=r.randrange(1280, 9000)) / s.Raw(payload[:1000])
    pkt = eth / ip
    for e in ext:
        pkt = pkt / e
    pkt = pkt / l4
    corrupt = r.random() < 0.15
    if corrupt:
        raw = s.Ether(bytes(pkt))
        layer = s.TCP if kind == "tcp" else s.UDP if kind == "udp" else icmpv6_layer(s, raw)
        if layer is None or layer not in raw:
            corrupt = False
        else:
            field = "cksum" if layer.__name__.startswith("ICMPv6") else "chksum"
            good = getattr(raw[layer], field)
            bad = (good + 1 + r.randrange(0xFFFE)) & 0xFFFF
            setattr(pkt[layer], field, bad or 1)
    return pkt, kind, expect


def check_ipv6(s, frame, kind, expect, got):
    p = s.Ether(frame)
    ip = p[s.IPv6]
    if expect == "Unsupported":
        assert got.get("error") == "Unsupported", got
        return
    assert "error" not in got, got
    gi = got["ipv6"]
    assert (gi["version"], gi["tc"], gi["fl"], gi["plen"], gi["nh"], gi["hlim"]) == (
        6, ip.tc, ip.fl, ip.plen, ip.nh, ip.hlim)
    assert (gi["src"], gi["dst"]) == (ip.src, ip.dst)
    # the walk: the upper layer starts where scapy's first non-extension layer does
    layer, off = ip.payload, 0
    ext_classes = (s.IPv6ExtHdrHopByHop, s.IPv6ExtHdrDestOpt, s.IPv6ExtHdrRouting,
                   s.IPv6ExtHdrFragment)
    while isinstance(layer, ext_classes):
        off += len(bytes(layer)) - len(bytes(layer.payload))
        if isinstance(layer, s.IPv6ExtHdrFragment) and (layer.offset or layer.m):
            break
        layer = layer.payload
    assert gi["upper_offset"] == off
    if expect == "fragment":
        assert got.get("fragment") is True
        return
    if kind == "tcp":
        t, gt = p[s.TCP], got["tcp"]
        assert (gt["sport"], gt["dport"], gt["seq"], gt["ack"]) == (t.sport, t.dport, t.seq, t.ack)
        assert (gt["flags"], gt["window"], gt["dataofs"]) == (int(t.flags), t.window, t.dataofs)
        assert gt["options"] == scapy_tcp_options(t.options)
        assert gt["checksum_ok"] == (t.chksum == recomputed6(s, frame, s.TCP))
        ok = gt["checksum_ok"]
    elif kind == "udp":
        u, gu = p[s.UDP], got["udp"]
        assert (gu["sport"], gu["dport"], gu["len"], gu["checksum"]) == (u.sport, u.dport, u.len, u.chksum)
        assert gu["checksum_ok"] == (u.chksum == recomputed6(s, frame, s.UDP))
        ok = gu["checksum_ok"]
    else:
        cls = icmpv6_layer(s, p)
        c, gc = p[cls], got["icmpv6"]
        assert (gc["type"], gc["code"], gc["checksum"]) == (c.type, c.code, c.cksum)
        assert gc["checksum_ok"] == (c.cksum == recomputed6(s, frame, cls))
        ok = gc["checksum_ok"]
        n = gc.get("ndp")
        if kind == "echo":
            assert (gc["id"], gc["seq"], gc["payload_len"]) == (c.id, c.seq, len(c.data))
        elif kind == "ns":
            assert n == {"target": c.tgt, "lladdr": p[s.ICMPv6NDOptSrcLLAddr].lladdr}
        elif kind == "na":
            assert n == {"target": c.tgt, "router": bool(c.R), "solicited": bool(c.S),
                         "override": bool(c.O), "lladdr": p[s.ICMPv6NDOptDstLLAddr].lladdr}
        elif kind == "ra":
            assert (n["chlim"], n["routerlifetime"]) == (c.chlim, c.routerlifetime)
            assert n["lladdr"] == p[s.ICMPv6NDOptSrcLLAddr].lladdr
            assert n["mtu"] == p[s.ICMPv6NDOptMTU].mtu
            assert (n["prefix"], n["prefixlen"]) == ("2001:db8:1::", 64)
        else:
            assert gc["mtu"] == c.mtu
    assert got["checksums_ok"] == ok


def test_random_scapy_ipv6_packets_parse_identically(scapy, wirecheck_parse):
    r = random.Random(int(os.environ.get("WIRE_SEED", "20261124")))
    made = [random_ipv6_packet(r, scapy) for _ in range(N_RANDOM)]
    frames = [bytes(p) for p, _, _ in made]
    results = wirecheck_parse(frames)
    counts = {}
    for frame, (_, kind, expect), got in zip(frames, made, results):
        check_ipv6(scapy, frame, kind, expect, got)
        counts[kind, expect] = counts.get((kind, expect), 0) + 1
    # every kind reached the upper layer, and both drop paths were taken
    for k in ("tcp", "udp", "echo", "ns", "na", "ra", "ptb"):
        assert counts.get((k, "ok"), 0) >= 10, counts
    assert sum(v for (k, e), v in counts.items() if e == "fragment") >= 10, counts
    assert sum(v for (k, e), v in counts.items() if e == "Unsupported") >= 3, counts


@pytest.mark.parametrize("seed", range(2))
def test_garbled_ipv6_frames_give_errors_not_crashes(scapy, wirecheck_parse, seed):
    r = random.Random(seed)
    frames = []
    for _ in range(200):
        f = bytearray(bytes(random_ipv6_packet(r, scapy)[0]))
        if r.random() < 0.5:
            f = f[: r.randrange(len(f) + 1)]
        else:
            for _ in range(r.randint(1, 6)):
                f[r.randrange(len(f))] = r.randrange(256)
        frames.append(bytes(f))
    for f, got in zip(frames, wirecheck_parse(frames)):
        assert got["len"] == len(f)
        if "error" in got:
            assert got["error"] in ("Truncated", "Malformed", "Unsupported")


@pytest.mark.parametrize("seed", [11, 12])
def test_tshark_agrees_with_our_ipv6_parse(scapy, tshark, wirecheck_parse, tmp_path, seed):
    s = scapy
    r = random.Random(seed)
    made = [random_ipv6_packet(r, s) for _ in range(150)]
    frames = [bytes(p) for p, _, _ in made]
    path = tmp_path / "random6.pcap"
    s.wrpcap(str(path), [s.Ether(f) for f in frames])
    fields = ["ipv6.plen", "ipv6.nxt", "ipv6.hlim", "ipv6.src", "ipv6.dst", "tcp.srcport",
              "tcp.dstport", "tcp.seq", "tcp.hdr_len", "tcp.checksum.status", "udp.length",
              "udp.checksum.status", "icmpv6.type", "icmpv6.checksum.status", "icmpv6.mtu"]
    cmd = [tshark, "-r", str(path), "-o", "tcp.check_checksum:TRUE",
           "-o", "udp.check_checksum:TRUE", "-o", "tcp.relative_sequence_numbers:FALSE",
           "-o", "tcp.analyze_sequence_numbers:FALSE", "-o", "ipv6.defragment:FALSE",
           "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [dict(zip(fields, line.split("|"))) for line in proc.stdout.splitlines()]
    ours = wirecheck_parse(frames)
    assert len(rows) == len(ours) == len(frames)
    compared = 0
    for i, (t, o, (_, kind, expect)) in enumerate(zip(rows, ours, made)):
        ctx = f"frame {i + 1}: tshark {t} ours {o}"
        if expect == "Unsupported":
            continue
        ip = o["ipv6"]
        assert int(t["ipv6.plen"]) == ip["plen"], ctx
        assert int(t["ipv6.hlim"]) == ip["hlim"], ctx
        assert (t["ipv6.src"], t["ipv6.dst"]) == (ip["src"], ip["dst"]), ctx
        if o.get("fragment"):
            continue
        compared += 1
        good = lambda ok: "1" if ok else "0"  # noqa: E731
        if "tcp" in o:
            c = o["tcp"]
            assert (int(t["tcp.srcport"]), int(t["tcp.dstport"]), int(t["tcp.seq"])) == (
                c["sport"], c["dport"], c["seq"]), ctx
            assert int(t["tcp.hdr_len"]) == 4 * c["dataofs"], ctx
            assert t["tcp.checksum.status"] == good(c["checksum_ok"]), ctx
        elif "udp" in o:
            assert int(t["udp.length"]) == o["udp"]["len"], ctx
            assert t["udp.checksum.status"] == good(o["udp"]["checksum_ok"]), ctx
        else:
            c = o["icmpv6"]
            assert int(t["icmpv6.type"]) == c["type"], ctx
            assert t["icmpv6.checksum.status"] == good(c["checksum_ok"]), ctx
            if c["type"] == 2:
                assert int(t["icmpv6.mtu"]) == c["mtu"], ctx
    assert compared >= 80


def test_no_ipv6_frame_left_unparsed(wirecheck_parse, scapy):
    """A plain IPv6 frame is not `other_ethertype` any more."""
    s = scapy
    f = bytes(s.Ether() / s.IPv6(src="2001:db8::1", dst="2001:db8::2") / s.UDP(dport=5001))
    got = wirecheck_parse([f])[0]
    assert "other_ethertype" not in got and got["checksums_ok"], got
    assert re.match(r"2001:db8::1$", got["ipv6"]["src"])
