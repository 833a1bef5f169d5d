"""A third opinion on parsing: the same kind of random scapy-built frames as
test_scapy_to_squall.py are written to a pcap, dissected by tshark, and the
fields tshark reports must equal what squall-wire parsed."""

import random
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_scapy_to_squall import random_packet  # noqa: E402

FIELDS = [
    "eth.src", "vlan.id", "ip.hdr_len", "ip.len", "ip.ttl", "ip.flags.mf", "ip.frag_offset",
    "ip.checksum.status", "tcp.srcport", "tcp.dstport", "tcp.seq", "tcp.ack", "tcp.flags",
    "tcp.hdr_len", "tcp.window_size_value", "tcp.options.mss_val", "tcp.options.wscale.shift",
    "tcp.options.sack_le", "tcp.options.sack_re", "tcp.options.timestamp.tsval",
    "tcp.options.timestamp.tsecr", "tcp.checksum.status", "udp.length", "udp.checksum.status",
    "icmp.type", "icmp.ident", "icmp.seq", "icmp.checksum.status", "arp.opcode",
    "arp.src.proto_ipv4", "arp.dst.proto_ipv4",
]
GOOD, BAD = "1", "0"


def join(values):
    return ",".join(str(v) for v in values)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_tshark_agrees_with_our_parse(scapy, tshark, wirecheck_parse, tmp_path, seed):
    s = scapy
    r = random.Random(seed)
    pkts = [random_packet(r, s) for _ in range(200)]
    frames = [bytes(p) for p in pkts]
    path = tmp_path / "random.pcap"
    s.wrpcap(str(path), [s.Ether(f) for f in frames])
    cmd = [tshark, "-r", str(path),
           "-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
           "-o", "udp.check_checksum:TRUE", "-o", "tcp.relative_sequence_numbers:FALSE",
           "-o", "tcp.analyze_sequence_numbers:FALSE",
           "-T", "fields", "-E", "separator=|", "-E", "occurrence=a"]
    for f in FIELDS:
        cmd += ["-e", f]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [dict(zip(FIELDS, line.split("|"))) for line in proc.stdout.splitlines()]
    ours = wirecheck_parse(frames)
    assert len(rows) == len(ours) == len(frames)
    compared_tcp = 0
    for i, (t, o) in enumerate(zip(rows, ours)):
        ctx = f"frame {i + 1}: tshark {t} ours {o}"
        assert t["eth.src"] == o["eth"]["src"], ctx
        assert t["vlan.id"] == (str(o["eth"]["vlan"]["vid"]) if o["eth"]["vlan"] else ""), ctx
        if "arp" in o:
            a = o["arp"]
            assert (t["arp.opcode"], t["arp.src.proto_ipv4"], t["arp.dst.proto_ipv4"]) == (
                str(a["op"]), a["spa"], a["tpa"]), ctx
            continue
        ip = o["ipv4"]
        assert int(t["ip.hdr_len"]) == 4 * ip["ihl"], ctx
        assert int(t["ip.len"]) == ip["total_len"], ctx
        assert int(t["ip.ttl"]) == ip["ttl"], ctx
        assert t["ip.flags.mf"] in ("1", "True") if ip["mf"] else t["ip.flags.mf"] in ("0", "False"), ctx
        assert int(t["ip.frag_offset"]) == ip["frag"], ctx
        assert t["ip.checksum.status"] == (GOOD if ip["checksum_ok"] else BAD), ctx
        if o.get("fragment"):
            continue  # we do not parse L4 of fragments; tshark may
        if "tcp" in o:
            c = o["tcp"]
            compared_tcp += 1
            assert (int(t["tcp.srcport"]), int(t["tcp.dstport"])) == (c["sport"], c["dport"]), ctx
            assert (int(t["tcp.seq"]), int(t["tcp.ack"])) == (c["seq"], c["ack"]), ctx
            assert int(t["tcp.flags"], 16) & 0x1FF == c["flags"], ctx
            assert int(t["tcp.hdr_len"]) == 4 * c["dataofs"], ctx
            assert int(t["tcp.window_size_value"]) == c["window"], ctx
            opts = c["options"]
            assert t["tcp.options.mss_val"] == join(x["value"] for x in opts if x["kind"] == "mss"), ctx
            assert t["tcp.options.wscale.shift"] == join(
                x["value"] for x in opts if x["kind"] == "wscale"), ctx
            sacks = [b for x in opts if x["kind"] == "sack" for b in x["blocks"]]
            assert t["tcp.options.sack_le"] == join(b[0] for b in sacks), ctx
            assert t["tcp.options.sack_re"] == join(b[1] for b in sacks), ctx
            ts = [x for x in opts if x["kind"] == "ts"]
            assert t["tcp.options.timestamp.tsval"] == join(x["tsval"] for x in ts), ctx
            assert t["tcp.options.timestamp.tsecr"] == join(x["tsecr"] for x in ts), ctx
            assert t["tcp.checksum.status"] == (GOOD if c["checksum_ok"] else BAD), ctx
        elif "udp" in o:
            u = o["udp"]
            assert int(t["udp.length"]) == u["len"], ctx
            if u["checksum"] != 0:
                assert t["udp.checksum.status"] == (GOOD if u["checksum_ok"] else BAD), ctx
        elif "icmp" in o:
            c = o["icmp"]
            assert (int(t["icmp.type"]), int(t["icmp.ident"]), int(t["icmp.seq"])) == (
                c["type"], c["id"], c["seq"]), ctx
            assert t["icmp.checksum.status"] == (GOOD if c["checksum_ok"] else BAD), ctx
    assert compared_tcp >= 30
