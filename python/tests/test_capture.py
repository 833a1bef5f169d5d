"""pcap/pcapng conversion: captures recorded from curl/nginx (with real retransmissions),
a synthetic capture with out-of-order, duplicate and overlapping segments and wrapping
sequence numbers, UDP captures, and the errors for captures that cannot be converted."""

from __future__ import annotations

import os
import shutil

import capgen
import dpkt
import pytest
from conftest import PCAPS
from helpers import buffers, commands, ip_gen

from squall.astf import ASTFCapInfo, ASTFCmdDelay, ASTFProfile, ASTFProgram, ProfileError
from squall.astf.capture import load_conversation


def body(n: int, seed: str) -> bytes:
    """The deterministic file content served by nginx in examples/pcaps/record.sh."""
    line = ("squall example payload " + seed + " ").encode()
    out = bytearray()
    i = 0
    while len(out) < n:
        out += b"%06d " % i + line + b"\n"
        i += 1
    return bytes(out[:n])


def sent(ir: dict, role: str) -> bytes:
    """Concatenated payload a program sends (buffers resolved, size/fill expanded)."""
    import base64

    bufs = buffers(ir)
    out = b""
    for c in commands(ir, ir["templates"][0][role]):
        if c["op"] in ("send", "send_msg"):
            b = bufs[c["buf"]]
            data = b["text"].encode() if "text" in b else base64.b64decode(b.get("base64", ""))
            out += data
    return out


def test_synthetic_capture_is_reproducible(tmp_path) -> None:
    p = tmp_path / "x.pcap"
    capgen.write_pcap(str(p), capgen.tcp_frames())
    with open(os.path.join(PCAPS, "tcp_ooo_retrans.pcap"), "rb") as f:
        assert p.read_bytes() == f.read()


def test_out_of_order_duplicates_overlaps_and_wrap_are_reassembled(validate) -> None:
    conv = load_conversation(os.path.join(PCAPS, "tcp_ooo_retrans.pcap"), None)
    assert conv.client == capgen.CLIENT and conv.server == capgen.SERVER
    assert conv.stream("c") == capgen.REQUEST
    assert conv.stream("s") == capgen.RESPONSE
    assert conv.stats["c_ooo_segments"] == 1 and conv.stats["s_ooo_segments"] == 1
    assert conv.stats["c_dup_bytes"] == len(capgen.REQUEST)
    assert conv.stats["s_dup_bytes"] == 1000 + 1000 + 100  # resent seg, overlap, tail overlap
    assert [t.side for t in conv.turns] == ["c", "s"]
    prof = ASTFProfile(default_ip_gen=ip_gen(), cap_list=ASTFCapInfo(file=os.path.join(PCAPS, "tcp_ooo_retrans.pcap")))
    ir = prof.to_json()
    validate(ir)
    assert ir["templates"][0]["port"] == 8080 and ir["templates"][0]["assoc"] == [{"port": 8080}]
    assert sent(ir, "client_program") == capgen.REQUEST
    assert sent(ir, "server_program") == capgen.RESPONSE
    cli = commands(ir, ir["templates"][0]["client_program"])
    srv = commands(ir, ir["templates"][0]["server_program"])
    assert [c["op"] for c in cli] == ["send", "recv"] and cli[1]["bytes"] == len(capgen.RESPONSE)
    # the client closed first: the server waits for its FIN
    assert [c["op"] for c in srv] == ["recv", "send", "wait_for_peer_close"]


def test_curl_nginx_capture(validate) -> None:
    conv = load_conversation(os.path.join(PCAPS, "http_get.pcap"), None)
    assert conv.server_port == 80 and conv.client[0] == "198.18.200.2"
    req, resp = conv.stream("c"), conv.stream("s")
    assert req.startswith(b"GET /hello.html HTTP/1.1\r\n")
    head, _, got = resp.partition(b"\r\n\r\n")
    assert b"Content-Length: 2000" in head and got == body(2000, "hello")


def test_lossy_capture_with_real_retransmissions() -> None:
    conv = load_conversation(os.path.join(PCAPS, "http_lossy.pcap"), None)
    assert conv.stats["s_dup_bytes"] > 0  # the capture holds retransmitted segments
    head, _, got = conv.stream("s").partition(b"\r\n\r\n")
    assert b"Content-Length: 20000" in head and got == body(20000, "page20k")


def test_program_from_file_relative_to_the_calling_file(tmp_path) -> None:
    shutil.copy(os.path.join(PCAPS, "http_get.pcap"), tmp_path / "c.pcap")
    script = tmp_path / "make.py"
    script.write_text("from squall.astf import ASTFProgram\nprog = ASTFProgram(file='c.pcap', side='s')\n")
    import runpy

    here = os.getcwd()
    os.chdir("/")  # not the cwd: the folder of the file that makes the call
    try:
        prog = runpy.run_path(str(script))["prog"]
    finally:
        os.chdir(here)
    assert [i.op for i in prog.instrs] == ["recv", "send", "wait_for_peer_close"]
    assert prog.server_port == 80 and prog.payload_len > 2000


def test_udp_capture_pcapng(validate) -> None:
    conv = load_conversation(os.path.join(PCAPS, "dns_udp.pcapng"), None)
    assert conv.transport == "udp" and conv.server_port == 53
    assert [t.side for t in conv.turns] == ["c", "s", "c", "s"]
    ir = ASTFProfile(default_ip_gen=ip_gen(), cap_list=[ASTFCapInfo(file=os.path.join(PCAPS, "dns_udp.pcapng"),
                                                                     cps=3)]).to_json()
    validate(ir)
    t = ir["templates"][0]
    assert t["transport"] == "udp" and t["port"] == 53 and t["cps"] == 3
    assert [c["op"] for c in commands(ir, t["client_program"])] == ["send_msg", "recv_msg", "send_msg", "recv_msg"]
    assert [c.get("count") for c in commands(ir, t["client_program"])] == [None, 1, None, 2]
    assert [c["op"] for c in commands(ir, t["server_program"])] == ["recv_msg", "send_msg", "recv_msg", "send_msg"]
    assert "base64" in buffers(ir)[commands(ir, t["client_program"])[0]["buf"]]


def test_udp_mtu_and_server_delay() -> None:
    ir = ASTFProfile(default_ip_gen=ip_gen(), s_delay=ASTFCmdDelay(500),
                     cap_list=[ASTFCapInfo(file=os.path.join(PCAPS, "dns_udp.pcapng"), udp_mtu=60)]).to_json()
    t = ir["templates"][0]
    srv = commands(ir, t["server_program"])
    assert [c["op"] for c in srv] == ["recv_msg", "delay", "send_msg", "recv_msg", "delay", "send_msg"]
    for b in ir["buffers"]:
        assert len(__import__("base64").b64decode(b["base64"])) <= 60 - 42


def _write(path: str, frames: list) -> None:
    capgen.write_pcap(path, frames)


def test_gap_in_the_stream_is_an_error(tmp_path) -> None:
    frames = capgen.tcp_frames()
    del frames[7]  # the first response segment is never captured
    p = str(tmp_path / "gap.pcap")
    _write(p, frames)
    with pytest.raises(ProfileError) as ei:
        ASTFCapInfo(file=p)
        load_conversation(p, None)
    assert "gap" in ei.value.msg and "bytes 0..999" in ei.value.msg


def test_two_conversations_and_garbage_are_errors(tmp_path) -> None:
    frames = capgen.tcp_frames()
    other = capgen._frame(("198.18.9.9", 1234), ("198.18.7.1", 80), 5, 0, dpkt.tcp.TH_SYN)
    p = str(tmp_path / "two.pcap")
    _write(p, frames + [other])
    with pytest.raises(ProfileError, match="2 conversations"):
        load_conversation(p, None)
    g = tmp_path / "garbage.pcap"
    g.write_bytes(b"not a capture at all")
    with pytest.raises(ProfileError, match="not a pcap"):
        load_conversation(str(g), None)
    with pytest.raises(ProfileError, match="cannot open"):
        load_conversation(str(tmp_path / "missing.pcap"), None)


def test_server_speaks_first_and_reset(tmp_path) -> None:
    c, s = ("198.18.7.2", 5000), ("198.18.7.1", 25)
    S, A, P, R = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_PUSH, dpkt.tcp.TH_RST
    f = capgen._frame
    frames = [f(c, s, 100, 0, S), f(s, c, 900, 101, S | A), f(c, s, 101, 901, A),
              f(s, c, 901, 101, A | P, b"220 hello\r\n"), f(c, s, 101, 912, A | P, b"QUIT\r\n"),
              f(s, c, 912, 107, A | P, b"221 bye\r\n"), f(c, s, 107, 921, R | A)]
    p = str(tmp_path / "smtp.pcap")
    _write(p, frames)
    cli = ASTFProgram(file=p, side="c")
    srv = ASTFProgram(file=p, side="s")
    assert [i.op for i in cli.instrs] == ["recv", "send", "recv", "reset"]
    assert [i.op for i in srv.instrs] == ["accept", "send", "recv", "send"]
    assert cli.instrs[2].args == {"bytes": 20}


def test_capinfo_errors_point_at_the_capinfo_line(tmp_path) -> None:
    with pytest.raises(ProfileError) as ei:
        ASTFProfile(default_ip_gen=ip_gen(), cap_list=[ASTFCapInfo(file="does/not/exist.pcap")])
    assert ei.value.filename == __file__ and "cannot open" in ei.value.msg
    with pytest.raises(ProfileError, match="both"):
        ASTFCapInfo(file="x.pcap", cps=1, l7_percent=50)


def test_l7_percent_sets_rates() -> None:
    caps = [ASTFCapInfo(file=os.path.join(PCAPS, "http_get.pcap"), l7_percent=75),
            ASTFCapInfo(file=os.path.join(PCAPS, "dns_udp.pcapng"), l7_percent=25)]
    ir = ASTFProfile(default_ip_gen=ip_gen(), cap_list=caps).to_json()
    http, dns = ir["templates"]
    conv_h = load_conversation(os.path.join(PCAPS, "http_get.pcap"), None)
    conv_d = load_conversation(os.path.join(PCAPS, "dns_udp.pcapng"), None)
    # bytes per second split 75/25
    ratio = (http["cps"] * conv_h.payload_len) / (dns["cps"] * conv_d.payload_len)
    assert abs(ratio - 3.0) < 1e-9
    with pytest.raises(ProfileError, match="sum up to 100"):
        ASTFProfile(default_ip_gen=ip_gen(), cap_list=caps[:1])


def test_ipv6_raw_ip_and_linux_cooked_link_types(tmp_path) -> None:
    S, A, P = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_PUSH
    c6, s6 = "2001:db8::2", "2001:db8::1"

    def v6(src: tuple, dst: tuple, seq: int, flags: int, data: bytes = b"") -> bytes:
        import socket

        tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq, flags=flags, data=data)
        ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src[0]),
                          dst=socket.inet_pton(socket.AF_INET6, dst[0]), nxt=dpkt.ip.IP_PROTO_TCP, hlim=64,
                          data=tcp, plen=len(tcp))
        return bytes(ip)

    c, s = (c6, 40000), (s6, 443)
    frames = [v6(c, s, 10, S), v6(s, c, 70, S | A), v6(c, s, 11, A | P, b"hello"), v6(s, c, 71, A | P, b"world!")]
    p = str(tmp_path / "v6.pcap")
    with open(p, "wb") as fh:
        w = dpkt.pcap.Writer(fh, linktype=dpkt.pcap.DLT_RAW)
        for i, fr in enumerate(frames):
            w.writepkt(fr, ts=1.0 + i)
    conv = load_conversation(p, None)
    assert conv.client == c and conv.stream("c") == b"hello" and conv.stream("s") == b"world!"
    # the same IPv4 conversation behind a Linux cooked header
    sll = []
    for fr in capgen.tcp_frames():
        ip = bytes(dpkt.ethernet.Ethernet(fr).data)
        sll.append(bytes(dpkt.sll.SLL(type=0, hrd=1, hlen=6, hdr=b"\x02" * 6 + b"\0\0", ethtype=0x0800, data=ip)))
    p2 = str(tmp_path / "sll.pcap")
    with open(p2, "wb") as fh:
        w = dpkt.pcap.Writer(fh, linktype=dpkt.pcap.DLT_LINUX_SLL)
        for i, fr in enumerate(sll):
            w.writepkt(fr, ts=1.0 + i)
    assert load_conversation(p2, None).stream("s") == capgen.RESPONSE


def test_tcp_pcapng(tmp_path) -> None:
    p = str(tmp_path / "t.pcapng")
    with open(p, "wb") as fh:
        w = dpkt.pcapng.Writer(fh, linktype=dpkt.pcap.DLT_EN10MB)
        for i, fr in enumerate(capgen.tcp_frames()):
            w.writepkt(fr, ts=1.0 + i)
    conv = load_conversation(p, None)
    assert conv.stream("c") == capgen.REQUEST and conv.stream("s") == capgen.RESPONSE


def test_corrupt_captures_only_raise_profile_errors(tmp_path) -> None:
    import random

    rng = random.Random(7)
    srcs = []
    for n in ("http_get.pcap", "dns_udp.pcapng", "tcp_ooo_retrans.pcap"):
        with open(os.path.join(PCAPS, n), "rb") as f:
            srcs.append(f.read())
    p = str(tmp_path / "f.pcap")
    for _ in range(300):
        d = bytearray(rng.choice(srcs))
        if rng.randrange(3) == 0:
            d = d[: rng.randrange(len(d))]
        else:
            for _ in range(rng.randrange(1, 8)):
                d[rng.randrange(len(d))] = rng.randrange(256)
        with open(p, "wb") as f:
            f.write(d)
        try:
            load_conversation(p, None)
        except ProfileError:
            pass
