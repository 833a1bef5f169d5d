"""`squall.Client`: error mapping and waits against a scripted fake daemon (always run), and
end to end against the real `squall daemon` (needs the binary: `$SQUALL_BIN`, skipped
otherwise): load the W1 profile, start, live stats, rate update, stop, zero errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from typing import Any, Callable, Dict, Iterator, List

import pytest
from conftest import EXAMPLES

from squall import Client, ClientError, ProfileLoadError
from squall.astf import (ASTFIPGen, ASTFIPGenDist, ASTFProfile, ASTFProgram,
                         ASTFTCPClientTemplate, ASTFTCPServerTemplate, ASTFTemplate)

Handler = Callable[[Dict[str, Any]], Dict[str, Any]]


def _fake_daemon(handler: Handler) -> Iterator[int]:
    """A one-connection JSON-RPC server on a loopback port answering with `handler`."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve() -> None:
        conn, _ = srv.accept()
        f = conn.makefile("rwb")
        for line in f:
            req = json.loads(line)
            body = handler(req)
            f.write((json.dumps(dict({"jsonrpc": "2.0", "id": req["id"]}, **body)) + "\n").encode())
            f.flush()
        conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield port
    srv.close()


def _api(req: Dict[str, Any]) -> Dict[str, Any]:
    return {"result": {"api_version": "1.0", "server": "fake", "version": "0"}}


def test_errors_and_wait_with_fake_daemon() -> None:
    seen: List[Dict[str, Any]] = []

    def handler(req: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(req)
        m = req["method"]
        if m == "api_version":
            return _api(req)
        if m == "load_profile":
            return {"error": {"code": -32002, "message": "invalid profile (1 error(s))",
                              "data": {"errors": [{"path": "global.tcp.mss", "message": "too big"}]}}}
        if m == "update":
            return {"error": {"code": -32003, "message": "no real-time run in progress"}}
        if m == "wait_on_traffic":
            return {"result": {"finished": False, "state": "running"}}
        return {"error": {"code": -32601, "message": "method not found"}}

    for port in _fake_daemon(handler):
        with Client(port=port) as c:
            with pytest.raises(ProfileLoadError) as ei:
                c.load_profile({"version": 1})
            assert ei.value.code == -32002
            assert ei.value.errors == [{"path": "global.tcp.mss", "message": "too big"}]
            assert "global.tcp.mss: too big" in str(ei.value)
            with pytest.raises(ClientError) as ce:
                c.update(2.0)
            assert ce.value.code == -32003
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                c.wait_on_traffic(timeout=0.2)
            assert time.monotonic() - t0 < 10
    assert seen[1]["params"] == {"profile": {"version": 1}}
    assert seen[2]["params"] == {"mult": 2.0}
    assert all(r["jsonrpc"] == "2.0" for r in seen)


def test_profile_arguments_become_ir(tmp_path: Any) -> None:
    got: List[Any] = []

    def handler(req: Dict[str, Any]) -> Dict[str, Any]:
        if req["method"] == "api_version":
            return _api(req)
        got.append(req["params"]["profile"])
        return {"result": {"templates": 1}}

    prog_c = ASTFProgram()
    prog_c.send(b"GET / HTTP/1.1\r\n\r\n")
    prog_c.recv(10)
    prog_s = ASTFProgram()
    prog_s.recv(18)
    prog_s.send(b"0123456789")
    ip = ASTFIPGen(dist_client=ASTFIPGenDist(["16.0.0.1", "16.0.0.9"]),
                   dist_server=ASTFIPGenDist(["48.0.0.1", "48.0.0.1"]))
    prof = ASTFProfile(default_ip_gen=ip, templates=ASTFTemplate(
        client_template=ASTFTCPClientTemplate(ip_gen=ip, program=prog_c, cps=5),
        server_template=ASTFTCPServerTemplate(program=prog_s)))
    j = tmp_path / "p.json"
    j.write_text(json.dumps(prof.to_json()))
    for port in _fake_daemon(handler):
        with Client(port=port) as c:
            c.load_profile(prof)
            c.load_profile(str(j))
            c.load_profile(os.path.join(EXAMPLES, "w1-astf-http.py"))
            with pytest.raises(TypeError):
                c.load_profile(42)
    assert got[0] == got[1] == prof.to_json()
    assert got[2]["templates"][0]["cps"] > 0


def test_connect_failure_is_a_client_error(tmp_path: Any) -> None:
    with pytest.raises(ClientError):
        Client(unix=str(tmp_path / "none.sock"), timeout=2).connect()
    with pytest.raises(ClientError):
        Client().get_stats()


SQUALL = os.environ.get("SQUALL_BIN")


@pytest.fixture
def daemon(tmp_path: Any) -> Iterator[str]:
    if not SQUALL or not os.access(SQUALL, os.X_OK):
        pytest.skip("no squall binary (set SQUALL_BIN)")
    sock = str(tmp_path / "squall.sock")
    p = subprocess.Popen([SQUALL, "daemon", "--unix", sock], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert line.startswith("listening unix"), line
        yield sock
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=30)


def _started(c: Client) -> int:
    return int(c.get_stats()["client"]["flows"]["started"])


def test_client_drives_daemon_end_to_end(daemon: str) -> None:
    with Client(unix=daemon, timeout=60) as c:
        info = c.load_profile(os.path.join(EXAMPLES, "w1-astf-http.py"))
        assert info["templates"] >= 1
        assert c.start(mult=100, duration=-1)["state"] == "running"
        assert c.is_traffic_active()
        with pytest.raises(ClientError) as ei:
            c.start()
        assert ei.value.code == -32001
        time.sleep(1.2)
        a = _started(c)
        time.sleep(1.0)
        b = _started(c)
        assert b > a > 0, "live stats do not move"
        st = c.get_stats()
        assert st["state"] == "running" and st["live"]["active_flows"] >= 0
        a = _started(c)
        time.sleep(2.0)
        before = _started(c) - a
        c.update(300)
        time.sleep(0.3)
        a = _started(c)
        time.sleep(2.0)
        after = _started(c) - a
        assert after >= 2 * before, (before, after)
        c.stop(timeout=60)
        st = c.get_stats()
        assert st["state"] == "done"
        assert st["errors"] == 0 and st["clean"] is True, st["invariants"]
        assert st["client"]["flows"]["completed"] == st["client"]["flows"]["started"]
        assert c.get_warnings() == []
        c.clear_stats()
        assert _started(c) == 0
        c.shutdown()
    deadline = time.monotonic() + 20
    while os.path.exists(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(daemon), "the daemon did not shut down"



def test_a_request_the_daemon_did_not_read_is_sent_again_once() -> None:
    """The daemon closes a connection idle while all its slots are taken, without an
    answer: the client's next request goes out again on a new connection (once)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(2)
    port = srv.getsockname()[1]
    seen: List[str] = []

    def serve() -> None:
        for n in range(2):
            conn, _ = srv.accept()
            f = conn.makefile("rwb")
            for line in f:
                req = json.loads(line)
                seen.append(f"{n}:{req['method']}")
                if n == 0 and req["method"] != "api_version":
                    break  # evicted: closed with the request unread
                body = _api(req) if req["method"] == "api_version" else {"result": {"ok": n}}
                f.write((json.dumps(dict({"jsonrpc": "2.0", "id": req["id"]}, **body))
                         + "\n").encode())
                f.flush()
            f.close()
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with Client(port=port) as c:
        assert c.call("get_status") == {"ok": 1}
    assert seen == ["0:api_version", "0:get_status", "1:api_version", "1:get_status"]
    srv.close()


def test_no_resend_in_the_handshake_or_for_run_changes() -> None:
    """A peer that closes without answering: connect() fails once (no loop of
    reconnections), and `start` is never sent twice."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    seen: List[str] = []
    mode = {"answer_api": False}

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            f = conn.makefile("rwb")
            for line in f:
                req = json.loads(line)
                seen.append(req["method"])
                if req["method"] == "api_version" and mode["answer_api"]:
                    f.write((json.dumps(dict({"jsonrpc": "2.0", "id": req["id"]}, **_api(req)))
                             + "\n").encode())
                    f.flush()
                    continue
                break  # closed with the request unanswered
            f.close()
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    with pytest.raises(ClientError, match="closed the connection"):
        Client(port=port).connect()
    assert seen == ["api_version"]
    mode["answer_api"] = True
    seen.clear()
    c = Client(port=port)
    c.connect()
    with pytest.raises(ClientError, match="closed the connection"):
        c.call("start", {"mult": 1})
    assert seen == ["api_version", "start"], seen
    srv.close()
