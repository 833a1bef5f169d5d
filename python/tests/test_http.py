"""The HTTP instructions: `http_request` / `http_wait_response` compile to the IR (schema
valid), bad arguments fail at the call's line, and the engine loads what they produce."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import buffers, commands, profile_of

from squall.astf import ASTFProgram, ProfileError

SQUALL = os.environ.get("SQUALL_BIN") or shutil.which("squall")


def http_client() -> ASTFProgram:
    c = ASTFProgram()
    c.set_var("n", 3)
    c.set_label("again")
    c.http_request("GET", ["/a", "/b"], pick="weighted", weights=[3, 1],
                   headers={"Host": "squall.test", "User-Agent": ["x/1", "y/2"]})
    c.http_wait_response()
    c.jmp_nz("n", "again")
    c.http_request("POST", "/form", headers={"Host": "squall.test", "Accept": ["a", "b"]},
                   header_pick={"Accept": "random"}, body=b"k=v")
    c.http_wait_response()
    return c


def test_http_instructions_compile_to_the_ir(validate) -> None:
    s = ASTFProgram()
    s.recv(1)
    ir = profile_of(http_client(), s).to_json()
    validate(ir)
    cmds = commands(ir)
    assert [x["op"] for x in cmds] == ["set_var", "set_label", "http_request", "http_wait_response",
                                       "jmp_nz", "http_request", "http_wait_response"]
    assert cmds[2] == {"op": "http_request", "method": "GET", "urls": ["/a", "/b"], "pick": "weighted",
                       "weights": [3, 1],
                       "headers": [{"name": "Host", "value": "squall.test"},
                                   {"name": "User-Agent", "values": ["x/1", "y/2"]}]}
    post = cmds[5]
    assert post["url"] == "/form" and post["headers"][1] == {"name": "Accept", "values": ["a", "b"],
                                                             "pick": "random"}
    assert buffers(ir)[post["body"]]["text"] == "k=v"


def test_the_engine_loads_the_compiled_program(tmp_path: Path) -> None:
    """`squall validate` (the engine's loader) accepts the IR the API wrote."""
    if not SQUALL:
        pytest.skip("no squall binary (set SQUALL_BIN)")
    s = ASTFProgram()
    s.recv(1)
    f = tmp_path / "p.json"
    f.write_text(json.dumps(profile_of(http_client(), s).to_json()))
    r = subprocess.run([SQUALL, "validate", str(f)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("kwargs,field", [
    ({"method": "G T", "headers": {"Host": "h"}}, "method"),
    ({"url": "/with space", "headers": {"Host": "h"}}, "url"),
    ({"url": [], "headers": {"Host": "h"}}, "url"),
    ({"url": ["/a", "/b"], "pick": "sometimes", "headers": {"Host": "h"}}, "pick"),
    ({"url": ["/a", "/b"], "weights": [1], "headers": {"Host": "h"}}, "weights"),
    ({"url": ["/a", "/b"], "weights": [4294967295, 1], "headers": {"Host": "h"}}, "weights"),
    ({"url": ["/a", "/b"], "pick": "weighted", "headers": {"Host": "h"}}, "weights"),
    ({"url": "/a", "pick": "random", "headers": {"Host": "h"}}, "pick"),
    ({"headers": {"Host": "h", "Content-Length": "3"}}, "headers"),
    ({"headers": {"Host": "h\r\nX: y"}}, "headers"),
    ({"headers": {"Bad Name": "v", "Host": "h"}}, "headers"),
    ({"method": "GET\n", "headers": {"Host": "h"}}, "method"),
    ({"headers": {"Host\n": "h"}}, "headers"),
    ({"headers": {"Host": "h\x00"}}, "headers"),
    ({"headers": {"Host": "h\u00e9"}}, "headers"),
    ({"url": ["/a", "/b"], "pick": "round_robin", "weights": [1, 2], "headers": {"Host": "h"}},
     "weights"),
    ({"headers": {"Host": "h"}, "header_pick": {"Accept": "flow"}}, "header_pick"),
    ({"headers": {}}, "headers"),
    ({"headers": {"Host": "h"}, "version": "2"}, "version"),
])
def test_bad_arguments_fail_at_the_call(kwargs: dict, field: str) -> None:
    c = ASTFProgram()
    with pytest.raises(ProfileError) as e:
        c.http_request(**kwargs)
    assert e.value.field == field, str(e.value)
    # HTTP/1.0 needs no Host.
    c.http_request(url="/", version="1.0")


def test_http_is_tcp_only() -> None:
    u = ASTFProgram(stream=False)
    with pytest.raises(ProfileError, match="TCP instruction"):
        u.http_wait_response()
