"""`squall.Client` review findings: a `.py` profile that fails to compile raises
`ProfileLoadError`; tunables only with a `.py` path; NaN/Infinity refused before sending;
an error answered with a null id is a `ClientError` with its code; a request over the
daemon's 16 MiB is refused before sending."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

import pytest
from conftest import EXAMPLES
from test_client import _api, _fake_daemon, daemon  # noqa: F401 (fixture)

from squall import Client, ClientError, ProfileLoadError
from squall.client import MAX_REQUEST, PARSE_ERROR


def _one_error(e: ProfileLoadError) -> str:
    assert e.code == -32002
    assert len(e.errors) == 1 and e.errors[0]["path"] == ".", e.errors
    return e.errors[0]["message"]


def test_py_profile_failures_are_profile_load_errors(tmp_path: Any) -> None:
    c = Client()  # compiling happens before anything is sent: no daemon needed
    # The profile's argparse rejects an unknown tunable (SystemExit(2) in TRex style).
    with pytest.raises(ProfileLoadError) as ei:
        c.load_profile(os.path.join(EXAMPLES, "trex-http-manual.py"), tunables={"nope": 1})
    msg = _one_error(ei.value)
    assert "rejected its tunables" in msg and "nope" in msg, msg
    assert "unrecognized arguments" in msg, msg
    # A tunable no parameter of get_profile() takes: squall.errors.ProfileError.
    with pytest.raises(ProfileLoadError) as ei:
        c.load_profile(os.path.join(EXAMPLES, "loop-elephant.py"), tunables={"nope": 1})
    assert "does not take tunable 'nope'" in _one_error(ei.value)
    # A bug in the profile's own code: reported at its line.
    bad = tmp_path / "bad.py"
    bad.write_text("class P:\n    def get_profile(self):\n        return 1 / 0\n\n"
                   "def register():\n    return P()\n")
    with pytest.raises(ProfileLoadError) as ei:
        c.load_profile(str(bad))
    msg = _one_error(ei.value)
    assert f"{bad}:3: ZeroDivisionError" in msg, msg
    # --help printed by the profile's argparse (SystemExit(0)).
    with pytest.raises(ProfileLoadError) as ei:
        c.load_profile(os.path.join(EXAMPLES, "trex-http-manual.py"), tunables={"help": ""})
    assert "help" in _one_error(ei.value)
    with pytest.raises(ProfileLoadError):
        c.load_profile(str(tmp_path / "missing.py"))
    # JSON files: unreadable, not JSON, not an object.
    with pytest.raises(ProfileLoadError):
        c.load_profile(str(tmp_path / "missing.json"))
    j = tmp_path / "p.json"
    j.write_text("{nope")
    with pytest.raises(ProfileLoadError) as ei:
        c.load_profile(str(j))
    assert "line 1 column 2" in _one_error(ei.value)
    j.write_text("[]")
    with pytest.raises(ProfileLoadError):
        c.load_profile(str(j))


def test_tunables_only_with_a_py_path(tmp_path: Any) -> None:
    c = Client()
    j = tmp_path / "p.json"
    j.write_text(json.dumps({"version": 1}))
    ir = {"version": 1}
    with open(os.path.join(EXAMPLES, "w1-astf-http.json")) as f:
        w1 = json.load(f)

    class Prof:
        def to_json(self) -> Dict[str, Any]:
            return dict(w1)

    for p in (str(j), ir, Prof()):
        with pytest.raises(ValueError, match="tunables apply to a .py profile"):
            c.load_profile(p, tunables={"size": 1})


def test_nan_null_id_errors_and_size_limit() -> None:
    seen: List[Dict[str, Any]] = []

    def handler(req: Dict[str, Any]) -> Dict[str, Any]:
        seen.append(req)
        if req["method"] == "api_version":
            return _api(req)
        if req["method"] == "get_stats":
            # As the daemon answers a line it cannot parse.
            return {"id": None, "error": {"code": PARSE_ERROR, "message": "parse error: x"}}
        return {"result": {"mult": req["params"].get("mult")}}

    for port in _fake_daemon(handler):
        with Client(port=port) as c:
            for bad in (float("nan"), float("inf"), -float("inf")):
                with pytest.raises(ValueError, match="NaN or infinite"):
                    c.update(bad)
                with pytest.raises(ValueError):
                    c.start(mult=1, duration=bad)
            with pytest.raises(ClientError) as ei:
                c.get_stats()
            assert ei.value.code == PARSE_ERROR and ei.value.message == "parse error: x"
            # Over 16 MiB: refused before sending; the connection stays usable.
            with pytest.raises(ClientError) as ei:
                c.load_profile({"version": 1, "pad": "x" * MAX_REQUEST})
            assert ei.value.code is None and "16 MiB" in str(ei.value)
            assert c.call("update", {"mult": 2.5}) == {"mult": 2.5}
            assert c.is_connected()
    assert [r["method"] for r in seen] == ["api_version", "get_stats", "update"]


def test_daemon_tunables_with_commas(daemon: str) -> None:
    """The daemon compiles a `.py` path with `-t KEY=VALUE`, which splits at commas: a
    value holding one is refused up front (-32602), others pass."""
    prof = os.path.join(EXAMPLES, "trex-http-manual.py")
    with Client(unix=daemon, timeout=60) as c:
        with pytest.raises(ClientError) as ei:
            c.call("load_profile", {"path": prof, "tunables": {"size": "10,5"}})
        assert ei.value.code == -32602 and "','" in ei.value.message, ei.value
        r = c.call("load_profile", {"path": prof, "tunables": {"size": 20}})
        assert r["templates"] >= 1
        c.shutdown()
