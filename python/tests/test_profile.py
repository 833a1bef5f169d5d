"""Profile-level classes compile to the expected IR: generators, association, templates,
tunables, template groups; whole-profile checks report the user's line."""

from __future__ import annotations

import inspect

import pytest
from helpers import http_programs, ip_gen, profile_of

from squall.astf import (ASTFAssociation, ASTFAssociationRule, ASTFGlobalInfo, ASTFGlobalInfoPerTemplate,
                         ASTFIPGen, ASTFIPGenDist, ASTFIPGenGlobal, ASTFProfile, ASTFProgram,
                         ASTFTCPClientTemplate, ASTFTCPServerTemplate, ASTFTemplate, ProfileError)


def lineno() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno


def test_ip_gen_dist_global(validate) -> None:
    g = ASTFIPGen(glob=ASTFIPGenGlobal(ip_offset="2.0.0.0", ip_offset_server="0.1.0.0"),
                  dist_client=ASTFIPGenDist(["16.0.0.1", "16.0.0.255"], distribution="rand",
                                            per_core_distribution="seq"),
                  dist_server=ASTFIPGenDist(["48.0.0.1", "48.0.0.3"]))
    c, s = http_programs()
    t = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c),
                     server_template=ASTFTCPServerTemplate(program=s))
    ir = ASTFProfile(default_ip_gen=g, templates=t).to_json()
    validate(ir)
    assert ir["ip_gens"] == [{
        "name": "default",
        "clients": {"range": ["16.0.0.1", "16.0.0.255"], "distribution": "rand", "per_core_distribution": "seq"},
        "servers": {"range": ["48.0.0.1", "48.0.0.3"], "distribution": "seq"},
        "ip_offset": "2.0.0.0", "ip_offset_server": "0.1.0.0"}]
    assert ir["templates"][0]["ip_gen"] == "default"


def test_template_fields_assoc_tunables_groups(validate) -> None:
    g = ip_gen()
    c, s = http_programs()
    ct = ASTFGlobalInfoPerTemplate()
    ct.tcp.initwnd = 4
    ct.ip.tos = 0x20
    st = ASTFGlobalInfoPerTemplate()
    st.tcp.mss = 1200
    t = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, port=8080, cps=2.5, limit=100,
                                                           glob_info=ct),
                     server_template=ASTFTCPServerTemplate(program=s, glob_info=st, assoc=ASTFAssociation(
                         [ASTFAssociationRule(port=8080, ip_start="48.0.0.1", ip_end="48.0.0.1")])),
                     tg_name="web")
    ir = ASTFProfile(default_ip_gen=g, templates=[t]).to_json()
    validate(ir)
    tj = ir["templates"][0]
    assert tj == {"tg_name": "web", "transport": "tcp", "client_program": "web_client",
                  "server_program": "web_server", "ip_gen": "default", "port": 8080, "cps": 2.5, "limit": 100,
                  "assoc": [{"port": 8080, "ip_start": "48.0.0.1", "ip_end": "48.0.0.1"}],
                  "client_tunables": {"tcp": {"initwnd": 4}, "ip": {"tos": 32}},
                  "server_tunables": {"tcp": {"mss": 1200}}}


def test_global_info_same_object_goes_to_both_sides(validate) -> None:
    info = ASTFGlobalInfo()
    info.tcp.mss = 1460
    info.tcp.initwnd = 2
    info.tcp.delay_ack_msec = 100
    info.tcp.burst_ack = False
    info.tcp.no_delay = 1
    info.ip.ttl = 32
    info.scheduler.rampup_sec = 3
    ir = profile_of(*http_programs(), default_c_glob_info=info, default_s_glob_info=info).to_json()
    validate(ir)
    assert ir["global"] == {"tcp": {"mss": 1460, "initwnd": 2, "delay_ack_msec": 100, "burst_ack": False,
                                    "no_delay": 1},
                            "ip": {"ttl": 32}, "scheduler": {"rampup_sec": 3}}


def test_global_info_per_side(validate) -> None:
    ci = ASTFGlobalInfo()
    ci.tcp.initwnd = 10
    si = ASTFGlobalInfo()
    si.tcp.rxbufsize = 65536
    ir = profile_of(*http_programs(), default_c_glob_info=ci, default_s_glob_info=si).to_json()
    validate(ir)
    assert ir["global"] == {"client": {"tcp": {"initwnd": 10}}, "server": {"tcp": {"rxbufsize": 65536}}}
    only_c = profile_of(*http_programs(), default_c_glob_info=ci).to_json()
    assert only_c["global"] == {"client": {"tcp": {"initwnd": 10}}}
    # The scheduler is the client's: TRex ignores the server side's rampup.
    si.scheduler.rampup_sec = 10
    ir = profile_of(*http_programs(), default_c_glob_info=ci, default_s_glob_info=si).to_json()
    assert "scheduler" not in ir["global"]
    ci.scheduler.rampup_sec = 2
    ir = profile_of(*http_programs(), default_c_glob_info=ci, default_s_glob_info=si).to_json()
    assert ir["global"]["scheduler"] == {"rampup_sec": 2}


@pytest.mark.parametrize("field,value,msg", [
    ("mss", 10, "out of range 64..=9216"),
    ("initwnd", 0, "out of range"),
    ("delay_ack_msec", 501, "out of range"),
    ("burst_ack", 2, "must be a bool or 0/1"),
    ("mss", "1460", "must be an integer"),
    ("no_delay", 4, "out of range 0..=3"),
    ("keepinit", 0, "out of range 1..=65533"),
    ("blackhole", 1, "out of range 0..=0"),
])
def test_tunable_values_are_checked_at_the_assignment(field, value, msg) -> None:
    info = ASTFGlobalInfo()
    with pytest.raises(ProfileError) as ei:
        line = lineno(); setattr(info.tcp, field, value)  # noqa: E702
    assert ei.value.field == f"tcp.{field}"
    assert msg in ei.value.msg
    assert ei.value.lineno == line and ei.value.filename == __file__


def test_unknown_and_trex_only_tunables() -> None:
    info = ASTFGlobalInfo()
    with pytest.raises(ProfileError) as ei:
        info.tcp.msss = 1
    assert ei.value.field == "tcp.msss" and "unknown tunable" in ei.value.msg
    # TRex's cc_algo and do_ecn: 0 (NewReno, no ECN) is what Squall's TCP does.
    info.tcp.cc_algo = 0
    info.tcp.do_ecn = 0
    with pytest.raises(ProfileError) as ei:
        info.tcp.cc_algo = 1
    assert ei.value.field == "tcp.cc_algo" and "NewReno" in ei.value.msg
    with pytest.raises(ProfileError) as ei:
        info.tcp.do_ecn = 1
    assert "no ECN" in ei.value.msg
    with pytest.raises(ProfileError) as ei:
        info.ipv6.enable = 2
    assert ei.value.field == "ipv6.enable" and "0..=1" in ei.value.msg
    with pytest.raises(ProfileError, match="IPv6 address"):
        info.ipv6.src_msb = "16.0.0.0"
    with pytest.raises(ProfileError):
        info.bogus.x = 1
    with pytest.raises(ProfileError, match="followed by a field"):
        info.tcp = 5
    pt = ASTFGlobalInfoPerTemplate()
    with pytest.raises(ProfileError):
        pt.scheduler.rampup_sec = 1  # global only
    info.scheduler.spacing = "poisson"
    with pytest.raises(ProfileError, match="even"):
        info.scheduler.spacing = "uniform"
    assert info.tcp.mss is None and info.scheduler.spacing == "poisson"


def test_ip_dist_errors_name_the_field() -> None:
    with pytest.raises(ProfileError) as ei:
        ASTFIPGenDist(["16.0.0.9", "16.0.0.1"])
    assert "empty pool" in ei.value.msg and ei.value.field == "ip_range"
    with pytest.raises(ProfileError) as ei:
        ASTFIPGenDist(["16.0.0.300", "16.0.1.1"])
    assert ei.value.field == "ip_range[0]"
    with pytest.raises(ProfileError) as ei:
        ASTFIPGenDist(["16.0.0.1", "16.0.0.2"], distribution="random")
    assert ei.value.field == "distribution"
    with pytest.raises(ProfileError):
        ASTFIPGenDist(["1.0.0.0", "9.0.0.0"])  # more than 2^24 addresses
    # What the loader refuses is refused at the user's line (not at an IR path).
    for bad, why in [(["0.0.0.1", "0.0.0.255"], "0.0.0.0/8"), (["127.0.0.1", "127.0.0.9"], "loopback"),
                     (["239.0.0.1", "239.0.0.2"], "multicast"), (["::", "::5"], "unspecified")]:
        with pytest.raises(ProfileError) as ei:
            ASTFIPGenDist(bad)
        assert why in ei.value.msg and ei.value.field == "ip_range" and ei.value.filename == __file__
    with pytest.raises(ProfileError):
        ASTFAssociationRule(port=70000)
    with pytest.raises(ProfileError):
        ASTFAssociationRule(port=80, ip_start="48.0.0.1")


def test_generators_are_shared_and_overlaps_rejected(validate) -> None:
    g1 = ip_gen("16.0.0.1", "16.0.0.10")
    g1b = ip_gen("16.0.0.1", "16.0.0.10")  # equal: shared
    g2 = ip_gen("17.0.0.1", "17.0.0.10")
    c, s = http_programs()
    c2, s2 = http_programs(resp=b"other")
    ts = [ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=cc, port=p),
                       server_template=ASTFTCPServerTemplate(program=ss, assoc=ASTFAssociationRule(port=p)))
          for g, cc, ss, p in ((g1, c, s, 80), (g1b, c, s, 81), (g2, c2, s2, 82))]
    ir = ASTFProfile(default_ip_gen=g1, templates=ts).to_json()
    validate(ir)
    assert [g["name"] for g in ir["ip_gens"]] == ["default", "ip_gen1"]
    assert [t["ip_gen"] for t in ir["templates"]] == ["default", "default", "ip_gen1"]
    # identical programs are emitted once
    assert len(ir["programs"]) == 4
    line = lineno(); g3 = ASTFIPGen(dist_client=ASTFIPGenDist(["16.0.0.5", "16.0.0.20"]), dist_server=ASTFIPGenDist(["48.0.0.1", "48.0.0.1"]))  # noqa: E702,E501
    t3 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g3, program=c, port=83),
                      server_template=ASTFTCPServerTemplate(program=s, assoc=ASTFAssociationRule(port=83)))
    with pytest.raises(ProfileError) as ei:
        ASTFProfile(default_ip_gen=g1, templates=ts + [t3]).to_json()
    assert "overlaps" in ei.value.msg and ei.value.lineno == line


def test_two_templates_on_one_port_rejected_at_the_template() -> None:
    g = ip_gen()
    c, s = http_programs()
    t1 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c),
                      server_template=ASTFTCPServerTemplate(program=s))
    line = lineno(); t2 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c), server_template=ASTFTCPServerTemplate(program=s))  # noqa: E702,E501
    with pytest.raises(ProfileError) as ei:
        ASTFProfile(default_ip_gen=g, templates=[t1, t2])
    assert "port 80" in ei.value.msg and ei.value.lineno == line


def test_recv_waiting_for_more_than_the_peer_sends() -> None:
    c = ASTFProgram()
    c.send(b"req")
    line = lineno(); c.recv(100)  # noqa: E702
    s = ASTFProgram()
    s.recv(3)
    s.send(b"x" * 99)
    with pytest.raises(ProfileError) as ei:
        profile_of(c, s).to_json()
    assert ei.value.lineno == line and "waits for 100 bytes" in ei.value.msg


def test_mixed_transport_template_and_type_errors() -> None:
    g = ip_gen()
    c = ASTFProgram()
    s = ASTFProgram(stream=False)
    with pytest.raises(ProfileError, match="UDP"):
        ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c),
                     server_template=ASTFTCPServerTemplate(program=s))
    with pytest.raises(ProfileError) as ei:
        ASTFTCPClientTemplate(ip_gen="16.0.0.1", program=c)  # type: ignore[arg-type]
    assert ei.value.field == "ip_gen"
    with pytest.raises(ProfileError) as ei:
        ASTFTCPClientTemplate(ip_gen=g, program=c, cps=0)
    assert ei.value.field == "cps"
    with pytest.raises(ProfileError) as ei:
        ASTFTCPClientTemplate(ip_gen=g, program=c, limit=10, cont=True)
    assert ei.value.field == "cont"
    with pytest.raises(ProfileError) as ei:
        ASTFProfile(default_ip_gen=g)
    assert "templates" in ei.value.msg
    with pytest.raises(ProfileError) as ei:
        ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c),
                     server_template=ASTFTCPServerTemplate(program=ASTFProgram()), tg_name="bad name")
    assert ei.value.field == "tg_name"


def test_to_json_str_round_trips() -> None:
    import json

    p = profile_of(*http_programs())
    assert json.loads(p.to_json_str()) == p.to_json()
    assert "\n" not in p.to_json_str(pretty=False)


def test_print_stats_and_update_keepalive(capsys) -> None:
    p = profile_of(*http_programs())
    p.print_stats()
    out = capsys.readouterr().out
    assert "Num buffers: 2" in out and "total bytes:" in out
    c = ASTFProgram(stream=False)
    c.set_keepalive_msg(5000)
    c.send_msg(b"q")
    s = ASTFProgram(stream=False)
    s.set_label("x")
    s.recv_msg(1)
    c.update_keepalive(s)
    assert [i.op for i in s.instrs][:2] == ["set_keepalive_msg", "set_label"] and s.labels["x"] == 1


def test_trex_tunables_table_is_accepted(validate) -> None:
    """Every tunable of TRex's table that Squall supports or accepts compiles to the IR."""
    c = ASTFGlobalInfo()
    c.tcp.keepinit = 5
    c.tcp.keepidle = 128
    c.tcp.keepintvl = 10
    c.tcp.blackhole = 0
    c.tcp.no_delay = 2
    c.ip.dont_use_inbound_mac = 1
    c.scheduler.accurate = 1
    c.ipv6.enable = 0
    pt = ASTFGlobalInfoPerTemplate()
    pt.tcp.no_delay = 3
    with pytest.raises(ProfileError, match="side-wide"):
        pt.tcp.keepidle = 10
    prog_c, prog_s = http_programs()
    ir = profile_of(prog_c, prog_s, default_c_glob_info=c, default_s_glob_info=c).to_json()
    validate(ir)
    assert ir["global"] == {"tcp": {"keepinit": 5, "keepidle": 128, "keepintvl": 10, "blackhole": 0,
                                    "no_delay": 2},
                            "ip": {"dont_use_inbound_mac": 1}, "scheduler": {"accurate": 1},
                            "ipv6": {"enable": 0}}
    assert pt.to_json() == {"tcp": {"no_delay": 3}}


def test_one_dist_in_several_generators_is_one_shared_pool(validate) -> None:
    """TRex: one ASTFIPGenDist passed to several ASTFIPGen/templates shares one distribution."""
    dist = ASTFIPGenDist(["16.0.0.1", "16.0.0.10"], distribution="seq")
    g1 = ASTFIPGen(dist_client=dist, dist_server=ASTFIPGenDist(["48.0.0.1", "48.0.0.1"]))
    g2 = ASTFIPGen(dist_client=dist, dist_server=ASTFIPGenDist(["48.0.0.2", "48.0.0.2"]))
    c, s = http_programs()
    ts = [ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, port=p),
                       server_template=ASTFTCPServerTemplate(program=s, assoc=ASTFAssociationRule(port=p)))
          for g, p in ((g1, 80), (g2, 81))]
    ir = ASTFProfile(default_ip_gen=g1, templates=ts).to_json()
    validate(ir)
    assert len(ir["ip_gens"]) == 2
    assert ir["ip_gens"][0]["clients"] == ir["ip_gens"][1]["clients"]
    # A shared pool has one ip_offset.
    g3 = ASTFIPGen(dist_client=dist, dist_server=ASTFIPGenDist(["48.0.0.3", "48.0.0.3"]),
                   glob=ASTFIPGenGlobal(ip_offset="2.0.0.0"))
    t3 = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g3, program=c, port=82),
                      server_template=ASTFTCPServerTemplate(program=s, assoc=ASTFAssociationRule(port=82)))
    with pytest.raises(ProfileError, match="one ip_offset"):
        ASTFProfile(default_ip_gen=g1, templates=ts + [t3]).to_json()


def test_equal_dists_in_several_generators_are_one_shared_pool(validate) -> None:
    """TRex compares distributions by value: two equal ASTFIPGenDist objects are one pool."""
    def gen(server: str) -> ASTFIPGen:
        return ASTFIPGen(dist_client=ASTFIPGenDist(["16.0.0.1", "16.0.0.255"]),
                         dist_server=ASTFIPGenDist([server, server]))
    c, s = http_programs()
    ts = [ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, port=p),
                       server_template=ASTFTCPServerTemplate(program=s, assoc=ASTFAssociationRule(port=p)))
          for g, p in ((gen("48.0.0.1"), 80), (gen("49.0.0.1"), 81))]
    ir = ASTFProfile(default_ip_gen=ts[0].client_template.ip_gen, templates=ts).to_json()
    validate(ir)
    assert len(ir["ip_gens"]) == 2
    assert ir["ip_gens"][0]["clients"] == ir["ip_gens"][1]["clients"]


def test_l7_map_association(validate) -> None:
    """TRex: ASTFAssociationRule(port=80, l7_map=[0, 1, 2, 3]) or a dict with masks/values."""
    g = ip_gen()
    get_c, get_s = http_programs(req=b"GET / HTTP/1.1\r\n\r\n")
    post_c, post_s = http_programs(req=b"POST /f HTTP/1.1\r\n\r\n", resp=b"HTTP/1.1 201 Created\r\n\r\n")
    ts = [ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c, port=80),
                       server_template=ASTFTCPServerTemplate(program=s, assoc=rule))
          for c, s, rule in ((get_c, get_s, ASTFAssociationRule(port=80, l7_map=[0, 1, 2, 3])),
                             (post_c, post_s, ASTFAssociationRule(
                                 port=80, l7_map={"offset": [0, 1], "mask": [255, 255], "value": [80, 79]})))]
    ir = ASTFProfile(default_ip_gen=g, templates=ts).to_json()
    validate(ir)
    assert ir["templates"][0]["assoc"] == [{"port": 80, "l7_map": {"offset": [0, 1, 2, 3]}}]
    assert ir["templates"][1]["assoc"] == [{"port": 80, "l7_map": {"offset": [0, 1], "mask": [255, 255],
                                                                    "value": [80, 79]}}]
    for bad, msg in (({"offset": [0], "mask": [1, 2]}, "one per offset"), ([0, 0], "distinct"),
                     ({"offset": [300]}, "0..255"), ({"value": [1]}, "offset \\(required\\)"), ("x", "list")):
        with pytest.raises(ProfileError, match=msg):
            ASTFAssociationRule(port=80, l7_map=bad)
