"""Fixtures for cross-checking squall-wire against scapy and tshark.

The Rust side is the `wirecheck` example of the squall-wire crate, run via
`cargo run -q -p squall-wire --example wirecheck` from the repository root,
or a prebuilt binary named by the environment variable SQUALL_WIRECHECK.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _wirecheck_cmd():
    exe = os.environ.get("SQUALL_WIRECHECK")
    if exe:
        return [exe]
    if shutil.which("cargo") is None:
        pytest.fail("cargo not found and SQUALL_WIRECHECK not set")
    return ["cargo", "run", "-q", "-p", "squall-wire", "--example", "wirecheck", "--"]


def _run(args, stdin_text=""):
    proc = subprocess.run(
        _wirecheck_cmd() + args,
        input=stdin_text,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=900,
    )
    if proc.returncode != 0:
        pytest.fail(f"wirecheck {args} failed ({proc.returncode}):\n{proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def wirecheck_parse():
    """Return f(list_of_frame_bytes) -> list of dicts, one per frame."""

    def parse(frames):
        text = "".join(bytes(f).hex() + "\n" for f in frames)
        out = _run(["parse"], text)
        assert len(out) == len(frames), "one JSON object per input frame"
        return out

    return parse


@pytest.fixture(scope="session")
def built_pcap(tmp_path_factory):
    """(path to a pcap built by squall-wire, list of frame descriptions)."""
    path = tmp_path_factory.mktemp("wirecheck") / "built.pcap"
    desc = _run(["build", str(path)])
    assert path.exists() and desc, "build wrote a pcap and described it"
    return path, desc


@pytest.fixture(scope="session")
def scapy():
    try:
        import scapy.all as s  # noqa: F401
    except ImportError:
        pytest.skip("scapy is not installed (apt install python3-scapy or pip install scapy)")
    return s


@pytest.fixture(scope="session")
def tshark():
    exe = shutil.which("tshark")
    if exe is None:
        pytest.skip("tshark is not installed (apt install tshark)")
    return exe
