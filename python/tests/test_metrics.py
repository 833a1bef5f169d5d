"""`squall run --metrics ADDR` scraped during a run and parsed with the Prometheus project's
own Python parser (`prometheus_client.parser`): an independent reading of our text
exposition. Needs the binary (`$SQUALL_BIN`, skipped otherwise) and prometheus_client
(scripts/deps.sh test)."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
from typing import Dict, Tuple

import pytest
from conftest import EXAMPLES
from test_squall_run import SQUALL

parser = pytest.importorskip("prometheus_client.parser")

pytestmark = pytest.mark.skipif(SQUALL is None, reason="no squall binary (set SQUALL_BIN)")


def test_metrics_parse_with_prometheus_client() -> None:
    assert SQUALL is not None
    proc = subprocess.Popen(
        [SQUALL, "run", os.path.join(EXAMPLES, "w1-astf-http.json"), "--duration", "4",
         "--mult", "500", "--drain-sec", "1", "--metrics", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline().strip()
        prefix = "squall: metrics at "
        assert first.startswith(prefix), first
        url = first[len(prefix):]
        for _ in range(2):  # two progress lines: two samples
            proc.stderr.readline()
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        families = {f.name: f for f in parser.text_string_to_metric_families(body)}
        # prometheus_client strips the _total suffix from counter family names.
        assert families["squall_flows_started"].type == "counter"
        assert families["squall_active_flows"].type == "gauge"
        lat = families["squall_latency_seconds"]
        assert lat.type == "histogram"
        samples: Dict[Tuple[str, str, str], float] = {}
        for s in lat.samples:
            samples[(s.name, s.labels.get("phase", ""), s.labels.get("le", ""))] = s.value
        count = samples[("squall_latency_seconds_count", "first_byte", "")]
        assert count > 0
        assert samples[("squall_latency_seconds_bucket", "first_byte", "+Inf")] == count
        started = families["squall_flows_started"].samples[0].value
        assert started >= count
        # The Prometheus project's own linter (Debian's prometheus package) when present:
        # names, units, types and help text by its rules.
        if shutil.which("promtool"):
            lint = subprocess.run(["promtool", "check", "metrics"], input=body,
                                  capture_output=True, text=True, timeout=30)
            assert lint.returncode == 0, lint.stdout + lint.stderr
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
