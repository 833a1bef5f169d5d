"""Captures replayed at their own pace (issue #10), end to end through `squall run --sim`:

* conversations converted from captures of real applications (an HTTPS session, an HTTP
  POST, a mail exchange, a remote-desktop session: `appcaps.py`) replay on an unimpaired
  wire with no retransmission and no flow ever waiting more than 1 ms of virtual time;
* every `.py` example profile runs with no retransmission and no warning.

Needs the `squall` binary (see test_squall_run.py); skipped without it.
"""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import dpkt
import pytest
from conftest import EXAMPLES
from test_squall_run import SQUALL, _env

import appcaps

pytestmark = pytest.mark.skipif(SQUALL is None, reason="no squall binary (set SQUALL_BIN)")

RETRANSMISSION_COUNTERS = ("tcps_rexmttimeo", "tcps_fastrexmt", "tcps_sndrexmitpack")

PROFILE = '''
from squall.astf import ASTFCapInfo, ASTFIPGen, ASTFIPGenDist, ASTFProfile


class Apps:
    def get_profile(self, **kwargs):
        ip_gen = ASTFIPGen(dist_client=ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.50"]),
                           dist_server=ASTFIPGenDist(ip_range=["48.0.0.1", "48.0.0.1"]))
        return ASTFProfile(default_ip_gen=ip_gen, cap_list=[
            ASTFCapInfo(file=name + ".pcap", cps=10, tg_name=name) for name in NAMES])


def register():
    return Apps()
'''


def _run(profile: str, out: str, *extra: str) -> Dict[str, Any]:
    assert SQUALL is not None
    r = subprocess.run([SQUALL, "run", profile, "--sim", "-q", "--json", out, *extra],
                       capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "warning:" not in r.stdout, r.stdout[-3000:]
    with open(out) as f:
        doc: Dict[str, Any] = json.load(f)
    return doc


def _retransmissions(doc: Dict[str, Any]) -> Dict[str, int]:
    return {f"{side}.{c}": doc[side]["tcp"][c] for side in ("client", "server") for c in RETRANSMISSION_COUNTERS}


def _longest_stall(path: str) -> Tuple[float, int]:
    """The longest time between two consecutive frames of one flow (s), and the flows."""
    last: Dict[Tuple[Tuple[str, int], ...], float] = {}
    worst = 0.0
    with open(path, "rb") as fh:
        for ts, buf in dpkt.pcap.Reader(fh):
            ip = dpkt.ethernet.Ethernet(buf).data
            tcp = ip.data
            if not isinstance(tcp, dpkt.tcp.TCP):
                continue
            key = tuple(sorted([(socket.inet_ntoa(ip.src), tcp.sport), (socket.inet_ntoa(ip.dst), tcp.dport)]))
            if key in last:
                worst = max(worst, ts - last[key])
            last[key] = ts
    return worst, len(last)


def test_application_captures_replay_without_retransmission_or_stall(tmp_path: Path) -> None:
    appcaps.write_all(str(tmp_path))
    names = list(appcaps.APPS)
    prof = tmp_path / "apps.py"
    prof.write_text(f"NAMES = {names!r}\n" + PROFILE)
    pcap = str(tmp_path / "run.pcap")
    doc = _run(str(prof), str(tmp_path / "out.json"), "-d", "1", "-m", "1", "--pcap", pcap, "--pcap-flows", "40")
    assert doc["clean"] and doc["warnings"] == []
    assert _retransmissions(doc) == {k: 0 for k in _retransmissions(doc)}
    groups = {g["name"]: g for g in doc["groups"]}
    for name in names:
        g = groups[name]
        assert g["client"]["completed"] == 10, g
        c_bytes, s_bytes = appcaps.payload_bytes(name)
        assert g["client"]["l7_rx_bytes"] == 10 * s_bytes and g["server"]["l7_rx_bytes"] == 10 * c_bytes
        # every flow finished at the instant it started (no timer was waited for)
        assert g["latency_us"]["last_byte"]["max"] <= 1000, g["latency_us"]
    stall, flows = _longest_stall(pcap)
    assert flows == 40
    assert stall <= 0.001, f"a flow waited {stall * 1e3:.1f} ms of virtual time"


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(EXAMPLES, "*.py"))), ids=os.path.basename)
def test_example_runs_without_retransmission(path: str, tmp_path: Path) -> None:
    doc = _run(path, str(tmp_path / "out.json"), "-d", "1", "-m", "5")
    assert doc["clean"], doc["invariants"]
    assert doc["warnings"] == []
    assert _retransmissions(doc) == {k: 0 for k in _retransmissions(doc)}
    assert doc["client"]["flows"]["completed"] > 0


def test_capture_shapes() -> None:
    # The conversations keep the shapes the tests rely on: bursts with an odd number of
    # segments and a short last one, and several short segments back to back.
    shapes: List[List[int]] = [sizes for bursts, _ in appcaps.APPS.values() for _, sizes in bursts]
    odd_short = [s for s in shapes if len(s) % 2 == 1 and len(s) > 1 and s[-1] < appcaps.MSS]
    assert len(odd_short) >= 4
    assert any(len(s) > 1 and all(x < appcaps.MSS for x in s) for s in shapes)
