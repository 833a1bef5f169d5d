"""IPv6 in the Python API (issue 13): TRex's `ipv6.*` tunables globally and per template,
native IPv6 pools in `ASTFIPGenDist`, mixed IPv4/IPv6 templates, an IPv6 capture turned
into a template; the IR validates against the schema, the engine loads and runs it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from typing import Any, Dict, List, Tuple

import dpkt
import pytest
from helpers import http_programs, ip_gen
from test_client import _api, _fake_daemon, daemon  # noqa: F401 (daemon: a fixture)
from test_squall_run import SQUALL, _env

from squall import Client, ClientError
from squall.astf import (ASTFAssociationRule, ASTFCapInfo, ASTFGlobalInfo, ASTFGlobalInfoPerTemplate,
                         ASTFIPGen, ASTFIPGenDist, ASTFProfile, ASTFTCPClientTemplate, ASTFTCPServerTemplate, ASTFTemplate, ProfileError)
from squall.client import _over_ipv6


def v6_gen() -> ASTFIPGen:
    return ASTFIPGen(dist_client=ASTFIPGenDist(ip_range=["2001:db8::1", "2001:db8::ff"]),
                     dist_server=ASTFIPGenDist(ip_range=["2001:db8:1::10", "2001:db8:1::10"]))


def test_native_ipv6_pool_compiles(validate) -> None:
    c, s = http_programs()
    g = v6_gen()
    t = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c),
                     server_template=ASTFTCPServerTemplate(program=s), tg_name="v6")
    ir = ASTFProfile(default_ip_gen=g, templates=t).to_json()
    validate(ir)
    assert ir["ip_gens"][0]["clients"]["range"] == ["2001:db8::1", "2001:db8::ff"]
    assert ir["ip_gens"][0]["servers"]["range"] == ["2001:db8:1::10", "2001:db8:1::10"]


def test_bad_ipv6_pools_name_the_field() -> None:
    with pytest.raises(ProfileError, match="first 96 bits") as ei:
        ASTFIPGenDist(ip_range=["2001:db8::1", "2001:db9::1"])
    assert ei.value.field == "ip_range"
    with pytest.raises(ProfileError, match="one family"):
        ASTFIPGenDist(ip_range=["16.0.0.1", "2001:db8::1"])
    with pytest.raises(ProfileError, match="not an IPv4 or IPv6 address"):
        ASTFIPGenDist(ip_range=["2001:db8::g", "2001:db8::1"])
    with pytest.raises(ProfileError, match="different families"):
        ASTFIPGen(dist_client=ASTFIPGenDist(["2001:db8::1", "2001:db8::2"]),
                  dist_server=ASTFIPGenDist(["48.0.0.1", "48.0.0.1"]))
    # the same low bits under different prefixes do not overlap
    a = ASTFIPGenDist(["2001:db8::1", "2001:db8::ff"])
    b = ASTFIPGenDist(["2001:db8:5::1", "2001:db8:5::ff"])
    assert not a.overlaps(b) and a.key() != b.key()


def test_trex_ipv6_tunables_global_and_per_template(validate) -> None:
    c, s = http_programs()
    g = ip_gen()
    info = ASTFGlobalInfo()
    info.ipv6.src_msb = "2001:db8:0:2222::"
    info.ipv6.dst_msb = "2001:db8:2:2222::"
    info.ipv6.enable = 1
    pt = ASTFGlobalInfoPerTemplate()
    pt.ipv6.enable = 0
    t1 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c),
                      server_template=ASTFTCPServerTemplate(program=s), tg_name="v6")
    t2 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, port=8080, glob_info=pt),
                      server_template=ASTFTCPServerTemplate(program=s, assoc=ASTFAssociationRule(port=8080)),
                      tg_name="also-v6")
    p = ASTFProfile(default_ip_gen=g, templates=[t1, t2], default_c_glob_info=info)
    ir = p.to_json()
    validate(ir)
    # The client's tunables choose the family (TRex): they go to global.client.
    assert ir["global"] == {"client": {"ipv6": {"src_msb": "2001:db8:0:2222::",
                                                "dst_msb": "2001:db8:2:2222::", "enable": 1}}}
    assert ir["templates"][1]["client_tunables"] == {"ipv6": {"enable": 0}}
    # TRex gives the profile's `enable` priority: a template's 0 does not take IPv6 away
    # (both templates are IPv6, the loader agrees: PROFILE.md#ipv6); a template's 1 adds it.
    assert p._is_ipv6(t1) and p._is_ipv6(t2)
    on = ASTFGlobalInfoPerTemplate()
    on.ipv6.enable = 1
    t3 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, port=8081, glob_info=on),
                      server_template=ASTFTCPServerTemplate(program=s, assoc=ASTFAssociationRule(port=8081)))
    p4 = ASTFProfile(default_ip_gen=g, templates=[t1, t3])
    assert not p4._is_ipv6(t1) and p4._is_ipv6(t3)
    # Given to both sides, the same values become the global section.
    ir2 = ASTFProfile(default_ip_gen=g, templates=[t1], default_c_glob_info=info,
                      default_s_glob_info=info).to_json()
    assert ir2["global"]["ipv6"]["enable"] == 1


def _engine(ir: Dict[str, Any], tmp_path: Any, *args: str) -> "subprocess.CompletedProcess[str]":
    assert SQUALL is not None
    p = tmp_path / "p.json"
    p.write_text(json.dumps(ir))
    return subprocess.run([SQUALL, "run", str(p), "--sim", "-d", "1", "-q", *args],
                          capture_output=True, text=True, timeout=300, env=_env())


@pytest.mark.skipif(SQUALL is None, reason="no squall binary (set SQUALL_BIN)")
def test_mixed_profile_runs_clean_with_groups(tmp_path: Any) -> None:
    c, s = http_programs()
    g4, g6 = ip_gen(), v6_gen()
    t4 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g4, program=c, cps=20),
                      server_template=ASTFTCPServerTemplate(program=s), tg_name="v4")
    t6 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g6, program=c, cps=10),
                      server_template=ASTFTCPServerTemplate(program=s), tg_name="v6")
    ir = ASTFProfile(default_ip_gen=g4, templates=[t4, t6]).to_json()
    out = tmp_path / "r.json"
    r = _engine(ir, tmp_path, "--json", str(out))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    groups = {g["name"]: g for g in res["groups"]}
    assert groups["v4"]["client"]["completed"] == 20 and groups["v4"]["server"]["accepted"] == 20
    assert groups["v6"]["client"]["completed"] == 10 and groups["v6"]["server"]["accepted"] == 10


def _v6_capture(path: str) -> None:
    S, A, P, F = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_PUSH, dpkt.tcp.TH_FIN
    c, s = ("2001:db8::2", 40000), ("2001:db8::1", 80)

    def fr(src: tuple, dst: tuple, seq: int, ack: int, flags: int, data: bytes = b"") -> bytes:
        tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq, ack=ack, flags=flags, data=data)
        ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src[0]),
                          dst=socket.inet_pton(socket.AF_INET6, dst[0]), nxt=dpkt.ip.IP_PROTO_TCP, hlim=64,
                          data=tcp, plen=len(tcp))
        return bytes(ip)

    req, resp = b"GET /six HTTP/1.1\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nsix"
    frames = [fr(c, s, 10, 0, S), fr(s, c, 70, 11, S | A), fr(c, s, 11, 71, A | P, req),
              fr(s, c, 71, 11 + len(req), A | P, resp), fr(c, s, 11 + len(req), 71 + len(resp), A | F),
              fr(s, c, 71 + len(resp), 12 + len(req), A | F)]
    with open(path, "wb") as fh:
        w = dpkt.pcap.Writer(fh, linktype=dpkt.pcap.DLT_RAW)
        for i, f in enumerate(frames):
            w.writepkt(f, ts=1.0 + i * 0.01)


def test_ipv6_capture_becomes_an_ipv6_template(tmp_path: Any, validate) -> None:
    cap = str(tmp_path / "v6.pcap")
    _v6_capture(cap)
    ir = ASTFProfile(default_ip_gen=v6_gen(), cap_list=[ASTFCapInfo(file=cap, cps=10)]).to_json()
    validate(ir)
    assert ir["templates"][0]["port"] == 80
    assert ir["ip_gens"][0]["clients"]["range"][0] == "2001:db8::1"
    if SQUALL is not None:
        r = _engine(ir, tmp_path)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        assert "CLEAN" in r.stdout


@pytest.mark.skipif(SQUALL is None, reason="no squall binary (set SQUALL_BIN)")
def test_trex_style_ipv6_profile_runs_clean() -> None:
    assert SQUALL is not None
    prof = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "squall", "tests", "profiles",
                        "trex-ipv6.py")
    r = subprocess.run([SQUALL, "run", prof, "--sim", "-d", "1", "-q"], capture_output=True, text=True,
                       timeout=300, env=_env())
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "CLEAN" in r.stdout


def _two_template_profile() -> ASTFProfile:
    """Two templates on IPv4 pools: msbs given globally (no `enable`), the second with
    its own `ipv6.enable` 0."""
    c, s = http_programs()
    g = ip_gen()
    info = ASTFGlobalInfo()
    info.ipv6.src_msb = "2001:db8:0:2222::"
    info.ipv6.dst_msb = "2001:db8:2:2222::"
    pt = ASTFGlobalInfoPerTemplate()
    pt.ipv6.enable = 0
    t1 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, cps=20),
                      server_template=ASTFTCPServerTemplate(program=s), tg_name="a")
    t2 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, port=8080, glob_info=pt,
                                                            cps=10),
                      server_template=ASTFTCPServerTemplate(program=s, assoc=ASTFAssociationRule(port=8080)),
                      tg_name="b")
    return ASTFProfile(default_ip_gen=g, templates=[t1, t2], default_c_glob_info=info)


def test_client_start_ipv6_loads_the_profile_over_ipv6(validate) -> None:
    """TRex's `ASTFClient.start(ipv6=True)` ("convert traffic to IPv6"): the client loads
    the profile with `ipv6.enable` 1 for every template before starting, and the profile
    as it was at the next plain `start`."""
    calls: List[Tuple[str, Any]] = []

    def handler(req: Dict[str, Any]) -> Dict[str, Any]:
        if req["method"] == "api_version":
            return _api(req)
        calls.append((req["method"], req.get("params")))
        if req["method"] == "load_profile":
            return {"result": {"templates": 2}}
        return {"result": {"state": "running"}}

    prof = _two_template_profile()
    ir = prof.to_json()
    for port in _fake_daemon(handler):
        with Client(port=port) as c:
            with pytest.raises(ClientError) as ei:
                c.start(ipv6=True)
            assert "load_profile" in str(ei.value)
            c.load_profile(prof)
            c.start(mult=2, ipv6=True)
            c.start(ipv6=True)
            c.start()
            c.start()
    assert [m for m, _ in calls] == ["load_profile", "load_profile", "start", "load_profile", "start",
                                     "load_profile", "start", "start"]
    v6 = calls[1][1]["profile"]
    validate(v6)
    assert calls[3][1]["profile"] == v6
    assert v6["global"]["ipv6"] == {"enable": 1}
    # the msbs stay; a template's own `enable` 0 gives way
    assert v6["global"]["client"]["ipv6"] == {"src_msb": "2001:db8:0:2222::", "dst_msb": "2001:db8:2:2222::"}
    assert v6["templates"][1]["client_tunables"] == {"ipv6": {"enable": 1}}
    assert calls[0][1]["profile"] == calls[5][1]["profile"] == ir == prof.to_json(), "untouched"
    assert calls[2][1] == {"mult": 2, "duration": -1.0, "sim": False}, "no ipv6 parameter for the daemon"


@pytest.mark.skipif(SQUALL is None, reason="no squall binary (set SQUALL_BIN)")
def test_ipv6_variant_of_a_profile_runs_over_ipv6(tmp_path: Any) -> None:
    """What `start(ipv6=True)` loads runs clean on the engine, every TCP frame IPv6 under
    the profile's msbs, both template groups."""
    ir = _over_ipv6(_two_template_profile().to_json())
    pcap, out = str(tmp_path / "t.pcap"), tmp_path / "r.json"
    r = _engine(ir, tmp_path, "--json", str(out), "--pcap", pcap)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads(out.read_text())
    groups = {g["name"]: g["client"]["completed"] for g in res["groups"]}
    assert (groups["a"], groups["b"]) == (20, 10)
    v4 = v6 = 0
    with open(pcap, "rb") as fh:
        for _, buf in dpkt.pcap.Reader(fh):
            eth = dpkt.ethernet.Ethernet(buf)
            if isinstance(eth.data, dpkt.ip.IP) and isinstance(eth.data.data, dpkt.tcp.TCP):
                v4 += 1
            if isinstance(eth.data, dpkt.ip6.IP6) and isinstance(eth.data.data, dpkt.tcp.TCP):
                v6 += 1
                assert {eth.data.src[:8], eth.data.dst[:8]} <= {
                    socket.inet_pton(socket.AF_INET6, "2001:db8:0:2222::")[:8],
                    socket.inet_pton(socket.AF_INET6, "2001:db8:2:2222::")[:8]}
    assert v4 == 0 and v6 >= 30, (v4, v6)


def test_client_start_ipv6_against_the_daemon(daemon: str) -> None:
    with Client(unix=daemon, timeout=60) as c:
        c.load_profile(_two_template_profile())
        assert c.start(duration=1, sim=True, ipv6=True)["state"] in ("running", "done")
        c.wait_on_traffic(timeout=120)
        st = c.get_stats()
        assert st["errors"] == 0 and st["clean"] is True, st["invariants"]
        assert st["client"]["flows"]["completed"] == 30
        c.shutdown()
