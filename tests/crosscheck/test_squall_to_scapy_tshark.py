"""squall-wire builds frames (`wirecheck build`): scapy must read back the
fields we meant and find every checksum correct; tshark must dissect the
pcap without malformed-packet or bad-checksum reports."""

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wire_helpers import recomputed, scapy_tcp_options  # noqa: E402

TSHARK_CHECKS = [
    "-o", "tcp.check_checksum:TRUE",
    "-o", "ip.check_checksum:TRUE",
    "-o", "udp.check_checksum:TRUE",
    "-o", "tcp.relative_sequence_numbers:FALSE",
]
# squall-wire's IPv6 frames, checked field by field in test_ipv6_crosscheck.py
IPV6_KINDS = ("tcp6", "udp6", "icmpv6")


def test_build_covers_every_kind(built_pcap):
    _, desc = built_pcap
    names = {d["name"] for d in desc}
    for n in ("syn_all_options", "sack_1", "sack_2", "sack_3", "sack_4", "vlan_data",
              "ip_options_router_alert", "raw_options_unknown_kind", "udp_0", "udp_1",
              "icmp_0", "icmp_1", "arp_0", "arp_1"):
        assert n in names
    kinds = set()
    for d in desc:
        for o in d.get("options", []):
            kinds.add(o["kind"])
    assert kinds >= {"mss", "wscale", "sackok", "sack", "ts", "nop", "eol", "unknown"}


def test_scapy_reads_our_frames(scapy, built_pcap):
    s = scapy
    path, desc = built_pcap
    pkts = s.rdpcap(str(path))
    assert len(pkts) == len(desc)
    for p, d in zip(pkts, desc):
        if d["kind"] in IPV6_KINDS:
            continue  # test_ipv6_crosscheck.py
        frame = bytes(p)
        name = d["name"]
        if "vlan" in d:
            if d["vlan"] is None:
                assert s.Dot1Q not in p, name
            else:
                q = p[s.Dot1Q]
                assert {"pcp": q.prio, "dei": bool(q.dei), "vid": q.vlan} == d["vlan"], name
        if d["kind"] == "arp":
            a = p[s.ARP]
            assert (a.op, a.hwsrc, a.psrc, a.hwdst, a.pdst) == (
                d["op"], d["hwsrc"], d["psrc"], d["hwdst"], d["pdst"]), name
            assert (a.hwtype, a.ptype, a.hwlen, a.plen) == (1, 0x0800, 6, 4)
            continue
        ip = p[s.IP]
        assert ip.chksum == recomputed(s, frame, s.IP), name
        assert ip.len == len(frame) - (18 if s.Dot1Q in p else 14), name
        if d["kind"] == "tcp":
            assert ip.ihl == d["ihl"] and ip.id == d["ident"] and ip.ttl == d["ttl"], name
            assert bytes(ip)[20:ip.ihl * 4].hex().startswith(d["ip_options"]), name
            t = p[s.TCP]
            assert (t.sport, t.dport, t.seq, t.ack) == (d["sport"], d["dport"], d["seq"], d["ack"]), name
            assert int(t.flags) == d["flags"] and t.window == d["window"], name
            assert t.dataofs == d["dataofs"], name
            assert t.chksum == recomputed(s, frame, s.TCP), name
            assert scapy_tcp_options(t.options) == d["options"], name
            assert len(t.payload) == d["payload_len"], name
        elif d["kind"] == "udp":
            u = p[s.UDP]
            assert (u.sport, u.dport, u.len) == (d["sport"], d["dport"], d["len"]), name
            if d["has_checksum"]:
                assert u.chksum != 0 and u.chksum == recomputed(s, frame, s.UDP), name
            else:
                assert u.chksum == 0, name
        elif d["kind"] == "icmp":
            c = p[s.ICMP]
            assert (c.type, c.code, c.id, c.seq) == (d["type"], 0, d["id"], d["seq"]), name
            assert c.chksum == recomputed(s, frame, s.ICMP), name
            assert len(c.payload) == d["payload_len"], name


def run_tshark(tshark, path, *args):
    proc = subprocess.run(
        [tshark, "-r", str(path), *TSHARK_CHECKS, *args],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_tshark_checksums_good_and_not_malformed(tshark, built_pcap):
    path, desc = built_pcap
    out = run_tshark(tshark, path, "-V")
    assert "Malformed" not in out
    statuses = re.findall(r"\[(?:header )?checksum status: ([a-z ]+)\]", out, re.I)
    assert statuses, "tshark printed checksum statuses"
    bad = [st for st in statuses if st not in ("Good", "Not present")]
    assert not bad, bad
    # IP header (every IPv4 frame) + TCP/UDP/ICMP, minus the one UDP
    # datagram sent without a checksum; IPv6 frames have one (TCP/UDP/ICMPv6)
    n_ip = sum(1 for d in desc if d["kind"] in ("tcp", "udp", "icmp"))
    n_ip6 = sum(1 for d in desc if d["kind"] in IPV6_KINDS)
    n_none = sum(1 for d in desc if d["kind"] == "udp" and not d["has_checksum"])
    assert statuses.count("Good") == 2 * n_ip - n_none + n_ip6
    assert statuses.count("Not present") == n_none


def test_tshark_expert_has_no_warnings_or_errors(tshark, built_pcap):
    path, _ = built_pcap
    out = run_tshark(tshark, path, "-q", "-z", "expert,warn")
    assert not re.search(r"^Errors \(\d+\)", out, re.M), out
    # table rows look like: "   1   Sequence   TCP  Connection reset (RST)"
    rows = re.findall(r"^\s+(\d+)\s+(\S+)\s+(\S+)\s+(.+)$", out, re.M)
    # the only warning allowed is the one for the RST frame we built on purpose
    allowed = [r for r in rows if r[1] == "Sequence" and "reset" in r[3].lower()]
    assert allowed, "expected tshark to report the deliberate RST:\n" + out
    others = [r for r in rows if r not in allowed]
    assert not others, out


def test_tshark_reads_our_tcp_options(tshark, built_pcap):
    path, desc = built_pcap
    out = run_tshark(
        tshark, path, "-T", "fields", "-E", "separator=|",
        "-e", "frame.number", "-e", "tcp.options.mss_val", "-e", "tcp.options.wscale.shift",
        "-e", "tcp.options.timestamp.tsval", "-e", "tcp.options.timestamp.tsecr",
        "-e", "tcp.options.sack_le", "-e", "tcp.options.sack_re", "-e", "vlan.id",
        "-e", "ip.hdr_len",
    )
    lines = out.splitlines()
    assert len(lines) == len(desc)
    for line, d in zip(lines, desc):
        if d["kind"] != "tcp":
            continue
        _, mss, ws, tsval, tsecr, sle, sre, vid, ihl = line.split("|")
        opts = {o["kind"]: o for o in d["options"]}
        assert mss == (str(opts["mss"]["value"]) if "mss" in opts else ""), d["name"]
        assert ws == (str(opts["wscale"]["value"]) if "wscale" in opts else ""), d["name"]
        if "ts" in opts:
            assert (tsval, tsecr) == (str(opts["ts"]["tsval"]), str(opts["ts"]["tsecr"])), d["name"]
        if "sack" in opts:
            blocks = opts["sack"]["blocks"]
            assert sle.split(",") == [str(b[0]) for b in blocks], d["name"]
            assert sre.split(",") == [str(b[1]) for b in blocks], d["name"]
        assert vid == (str(d["vlan"]["vid"]) if d["vlan"] else ""), d["name"]
        assert int(ihl) == 4 * d["ihl"], d["name"]
