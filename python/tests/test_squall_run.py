"""End to end with the engine: TRex-style profiles (imports unchanged) run through
`squall run --sim` on the embedded default and finish clean (exit status 0).

Needs the `squall` binary: `$SQUALL_BIN`, else `squall` on PATH; skipped when there is
none (e.g. `SQUALL_BIN=$CARGO_TARGET_DIR/debug/squall python3 -m pytest python/tests`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import List, Optional

import pytest
from conftest import EXAMPLES


def _squall() -> Optional[str]:
    cands: List[str] = []
    if os.environ.get("SQUALL_BIN"):
        cands.append(os.environ["SQUALL_BIN"])
    on_path = shutil.which("squall")
    if on_path:
        cands.append(on_path)
    return next((c for c in cands if os.path.isfile(c) and os.access(c, os.X_OK)), None)


SQUALL = _squall()
pytestmark = pytest.mark.skipif(SQUALL is None, reason="no squall binary (set SQUALL_BIN)")


def _env() -> dict:
    env = dict(os.environ)
    # the binary runs `python3 -m squall.compile`: make sure it finds this package
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__import__("squall").__file__)))
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


@pytest.mark.parametrize("name,tunables", [
    ("trex-http-manual.py", ["-t", "size=100"]),
    ("trex-nginx-wget.py", []),
    ("w1-astf-http.py", []),
    ("loop-elephant.py", ["-t", "rounds=3"]),
])
def test_profile_runs_clean(name: str, tunables: List[str]) -> None:
    assert SQUALL is not None
    r = subprocess.run([SQUALL, "run", os.path.join(EXAMPLES, name), "--sim", "-d", "1", "-m", "5", "-q",
                        *tunables], capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "CLEAN" in r.stdout


def test_profile_error_reaches_the_user() -> None:
    assert SQUALL is not None
    r = subprocess.run([SQUALL, "run", os.path.join(EXAMPLES, "trex-http-manual.py"), "--sim", "-d", "1", "-q",
                        "-t", "colour=red"], capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode == 2
    assert "rejected its tunables" in r.stderr
