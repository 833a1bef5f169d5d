"""`python -m squall.compile`: every example compiles and validates; TRex-style profiles
load unchanged; tunables reach get_profile; exit codes and the stderr error format."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from typing import Any, Dict, List

import pytest
from conftest import EXAMPLES, REPO

from squall.compile import main, parse_tunables
from squall.loader import compile_profile

PY_EXAMPLES = sorted(glob.glob(os.path.join(EXAMPLES, "*.py")))


def run(args: List[str], cwd: str = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "squall.compile", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_examples_exist() -> None:
    names = {os.path.basename(p) for p in PY_EXAMPLES}
    assert {"w1-astf-http.py", "http-dns-mix.py", "pcap-replay.py", "loop-elephant.py",
            "trex-http-manual.py", "trex-nginx-wget.py"} <= names


@pytest.mark.parametrize("path", PY_EXAMPLES, ids=os.path.basename)
def test_every_example_compiles_and_validates(path: str, validate) -> None:
    ir = compile_profile(path)
    validate(ir)
    assert ir["meta"]["source"] == os.path.basename(path)


def test_examples_through_the_cli(tmp_path, validate) -> None:
    for path in PY_EXAMPLES:
        out = tmp_path / "ir.json"
        r = run([path, "--out", str(out)], cwd=str(tmp_path))  # cwd elsewhere: paths stay profile-relative
        assert r.returncode == 0, r.stderr
        assert r.stdout == ""
        validate(json.loads(out.read_text()))


def _resolved(ir: Dict[str, Any]) -> Dict[str, Any]:
    """The IR with buffer references replaced by the buffers' content, meta dropped and
    defaults made explicit, for comparing two IRs that name things differently."""
    bufs = {b["name"]: {k: v for k, v in b.items() if k != "name"} for b in ir["buffers"]}
    progs = []
    for p in ir["programs"]:
        cmds = [dict(c, buf=bufs[c["buf"]]) if "buf" in c else c for c in p["commands"]]
        progs.append({"name": p["name"], "commands": cmds})
    return {"ip_gens": ir["ip_gens"], "programs": progs, "templates": ir["templates"],
            "global": ir.get("global")}


def test_w1_py_is_equivalent_to_the_json_example() -> None:
    ours = compile_profile(os.path.join(EXAMPLES, "w1-astf-http.py"))
    with open(os.path.join(EXAMPLES, "w1-astf-http.json")) as f:
        theirs = json.load(f)
    assert _resolved(ours) == _resolved(theirs)
    req = ours["buffers"][0]
    assert len(req["text"].encode()) == 100
    resp = ours["buffers"][1]
    head = resp["text"]
    assert resp["size"] == 32768
    assert int(head.split("Content-Length: ")[1].split("\r\n")[0]) == 32768 - len(head.encode())


def test_w1_initwnd_tunable_old_style_kwargs() -> None:
    ir = compile_profile(os.path.join(EXAMPLES, "w1-astf-http.py"), {"initwnd": "10"})
    assert ir["global"]["tcp"]["initwnd"] == 10
    assert ir["meta"]["tunables"] == {"initwnd": "10"}


def test_trex_style_argparse_tunables() -> None:
    path = os.path.join(EXAMPLES, "trex-http-manual.py")
    small = compile_profile(path)
    big = compile_profile(path, {"size": "500"})
    def resp(ir: Dict[str, Any]) -> str:
        return next(b["text"] for b in ir["buffers"] if b["text"].startswith("HTTP/1.1 200"))

    assert len(resp(big)) - len(resp(small)) == 490 + 1  # body + one more Content-Length digit
    assert "Content-Length: 524" in resp(big)
    assert "trex" not in sys.modules and "trex.astf.api" not in sys.modules


def test_named_parameter_tunables_and_unknown_tunable(tmp_path) -> None:
    path = os.path.join(EXAMPLES, "loop-elephant.py")
    ir = compile_profile(path, {"rounds": "7"})
    assert ir["programs"][0]["commands"][0] == {"op": "set_var", "id": 0, "val": 7}
    r = run([path, "-t", "nope=1"])
    assert r.returncode == 1
    assert "get_profile() does not take tunable 'nope'" in r.stderr
    assert r.stderr.startswith("squall: error: ")


def test_cli_tunables_parsing() -> None:
    assert parse_tunables(["a=1,b=x", "c="]) == {"a": "1", "b": "x", "c": ""}
    with pytest.raises(ValueError):
        parse_tunables(["novalue"])
    r = run([os.path.join(EXAMPLES, "http-dns-mix.py"), "-t", "http_cps=7,dns_cps=0.5", "--compact"])
    assert r.returncode == 0, r.stderr
    ir = json.loads(r.stdout)
    assert [t["cps"] for t in ir["templates"]] == [7, 0.5]
    assert r.stdout.count("\n") == 1


def test_trex_profile_help_and_rejected_tunables() -> None:
    path = os.path.join(EXAMPLES, "trex-http-manual.py")
    r = run([path, "--", "--help"])
    assert r.returncode == 3 and "--size" in r.stderr and r.stdout == ""
    r = run([path, "-t", "colour=red"])
    assert r.returncode == 1 and "rejected its tunables" in r.stderr


def test_usage_errors() -> None:
    assert run(["/nonexistent/profile.py"]).returncode == 2
    assert run([]).returncode == 2
    assert run([os.path.join(EXAMPLES, "w1-astf-http.py"), "-t", "bad"]).returncode == 2


def _write_profile(tmp_path, body: str) -> str:
    p = tmp_path / "prof.py"
    p.write_text(body)
    return str(p)


PROFILE_HEAD = """from trex.astf.api import *

class P:
    def get_profile(self, **kwargs):
        ip_gen = ASTFIPGen(dist_client=ASTFIPGenDist(["16.0.0.1", "16.0.0.2"]),
                           dist_server=ASTFIPGenDist(["48.0.0.1", "48.0.0.1"]))
        c = ASTFProgram()
        c.send(b"hello")
"""
PROFILE_TAIL = """        s = ASTFProgram()
        s.recv(5)
        s.send(b"world")
        t = ASTFTemplate(client_template=ASTFTCPClientTemplate(ip_gen=ip_gen, program=c),
                         server_template=ASTFTCPServerTemplate(program=s))
        return ASTFProfile(default_ip_gen=ip_gen, templates=t)

def register():
    return P()
"""


def test_profile_error_names_file_line_and_field(tmp_path) -> None:
    path = _write_profile(tmp_path, PROFILE_HEAD + "        c.recv(50)\n" + PROFILE_TAIL)
    r = run([path])
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == (f"squall: error: {path}:9: the client program waits for 50 bytes in total "
                                "but the server program sends only 5: the flow would hang")
    path = _write_profile(tmp_path, PROFILE_HEAD + "        info = ASTFGlobalInfo()\n"
                          "        info.tcp.initwnd = 99\n" + PROFILE_TAIL)
    r = run([path])
    assert r.returncode == 1
    assert f"{path}:10: tcp.initwnd = 99 is out of range 1..=20" in r.stderr


def test_exception_in_profile_code_is_reported_at_its_line(tmp_path) -> None:
    path = _write_profile(tmp_path, PROFILE_HEAD + "        x = {}['missing']\n" + PROFILE_TAIL)
    r = run([path])
    assert r.returncode == 1
    first = r.stderr.splitlines()[0]
    assert first == f"squall: error: {path}:9: KeyError: 'missing'"
    assert all(line.startswith("  ") for line in r.stderr.splitlines()[1:])


def test_profile_prints_go_to_stderr(tmp_path, validate) -> None:
    path = _write_profile(tmp_path, PROFILE_HEAD + "        print('debug from profile')\n"
                          "        c.recv(5)\n" + PROFILE_TAIL)
    r = run([path])
    assert r.returncode == 0, r.stderr
    assert "debug from profile" in r.stderr
    validate(json.loads(r.stdout))


def test_missing_register_and_wrong_return(tmp_path) -> None:
    path = _write_profile(tmp_path, "x = 1\n")
    r = run([path])
    assert r.returncode == 1 and "register()" in r.stderr
    path = _write_profile(tmp_path, "class P:\n    def get_profile(self):\n        return 42\n"
                          "def register():\n    return P()\n")
    r = run([path])
    assert r.returncode == 1 and "returned int, not an ASTFProfile" in r.stderr and f"{path}:2:" in r.stderr


def test_old_trex_import_path_and_os_without_import(tmp_path) -> None:
    body = (PROFILE_HEAD.replace("from trex.astf.api import *", "from trex_astf_lib.api import *")
            + "        c.recv(5)\n        assert os.path.basename(__file__) == 'prof.py'\n" + PROFILE_TAIL)
    path = _write_profile(tmp_path, body)
    assert main([path, "--out", str(tmp_path / "o.json")]) == 0
    assert "trex_astf_lib" not in sys.modules


def test_trex_exception_names_catch_profile_errors(tmp_path) -> None:
    body = ("from trex.astf.api import *\n"
            "try:\n    ASTFIPGenDist(['1.0.0.9', '1.0.0.1'])\nexcept TRexError as e:\n    CAUGHT = e.brief()\n"
            "def register():\n    raise ASTFError(CAUGHT)\n")
    path = _write_profile(tmp_path, body)
    r = run([path])
    assert r.returncode == 1 and "empty pool" in r.stderr
