"""Builders used by several test modules."""

from __future__ import annotations

from typing import Any, Dict, Optional

from squall.astf import (ASTFIPGen, ASTFIPGenDist, ASTFProfile, ASTFProgram, ASTFTCPClientTemplate,
                         ASTFTCPServerTemplate, ASTFTemplate)


def ip_gen(c: str = "16.0.0.1", c2: str = "16.0.0.10", s: str = "48.0.0.1", s2: str = "48.0.0.1") -> ASTFIPGen:
    return ASTFIPGen(dist_client=ASTFIPGenDist([c, c2]), dist_server=ASTFIPGenDist([s, s2]))


def http_programs(req: bytes = b"GET / HTTP/1.1\r\n\r\n", resp: bytes = b"HTTP/1.1 200 OK\r\n\r\nhello") -> Any:
    c = ASTFProgram()
    c.send(req)
    c.recv(len(resp))
    s = ASTFProgram()
    s.recv(len(req))
    s.send(resp)
    return c, s


def profile_of(c: ASTFProgram, s: ASTFProgram, **kw: Any) -> ASTFProfile:
    g = ip_gen()
    t = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=g, program=c),
                     server_template=ASTFTCPServerTemplate(program=s))
    return ASTFProfile(default_ip_gen=g, templates=t, **kw)


def commands(ir: Dict[str, Any], name: Optional[str] = None) -> Any:
    progs = {p["name"]: p["commands"] for p in ir["programs"]}
    if name is None:
        name = ir["templates"][0]["client_program"]
    return progs[name]


def buffers(ir: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {b["name"]: b for b in ir["buffers"]}
