"""Compile a Python traffic profile to Squall's JSON IR: the contract with `squall run`.

Usage::

    python3 -m squall.compile PROFILE.py [-t KEY=VALUE[,KEY=VALUE...]]... [--out FILE]
                              [--compact] [-- EXTRA_ARGS...]

* `PROFILE.py` defines `register()` returning an object with `get_profile(...)` that
  returns an `ASTFProfile` (TRex convention). It may `from trex.astf.api import *`
  unchanged; the TRex module paths exist while it loads (see `squall.compat`).
* `-t KEY=VALUE` (repeatable, or comma-separated in one `-t`): tunables passed to
  `get_profile` the TRex way (see `squall.loader`): as the argv list `--KEY VALUE`
  for `get_profile(self, tunables, **kwargs)`, as keyword arguments (numbers converted)
  for `get_profile(self, **kwargs)` or named parameters. `EXTRA_ARGS` after `--` are
  appended verbatim to the argv list (e.g. `-- --help`).
* Output: the IR as one JSON document (indented; `--compact` for one line) on stdout,
  or written to `--out FILE` (nothing on stdout then).

Exit status:

* 0 - compiled; the IR is on stdout or in FILE.
* 1 - the profile is wrong: a `ProfileError`, any exception raised by the profile's code,
  or its argparse rejecting the tunables. Nothing is written to stdout / FILE.
* 2 - usage error of this command (bad arguments, PROFILE.py missing or unreadable).
* 3 - the profile printed help (argparse `--help` in its tunables) and produced no IR.

Errors go to stderr, one per line, in the form::

    squall: error: FILE:LINE: MESSAGE       (location known: the user's line at fault)
    squall: error: MESSAGE                  (no location)

An unexpected exception from the profile's code is reported at the innermost frame of
the profile's own files, as `FILE:LINE: ExcType: message`, and followed by the Python
traceback indented by two spaces, for context. `squall run` prints stderr as is.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import traceback
from contextlib import redirect_stdout
from typing import Dict, List, Optional, Sequence

from .errors import ProfileError

EXIT_OK, EXIT_PROFILE, EXIT_USAGE, EXIT_HELP = 0, 1, 2, 3
_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _err(msg: str) -> None:
    sys.stderr.write(f"squall: error: {msg}\n")


def parse_tunables(items: Sequence[str]) -> Dict[str, str]:
    """`["a=1,b=2", "c=x"]` -> `{"a": "1", "b": "2", "c": "x"}`; ValueError on a bad item."""
    out: Dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            if not part:
                continue
            key, sep, val = part.partition("=")
            key = key.strip()
            if not sep or not key or not key.replace("_", "").replace("-", "").isalnum():
                raise ValueError(f"bad tunable {part!r}: expected KEY=VALUE")
            out[key] = val
    return out


def _user_frame(tb: Optional[traceback.StackSummary], profile: str) -> Optional[traceback.FrameSummary]:
    """The innermost traceback frame in the profile's folder (its own files), else the
    innermost one outside the squall package, the stdlib and site-packages."""
    if not tb:
        return None
    folder = os.path.dirname(os.path.abspath(profile)) + os.sep
    for fs in reversed(tb):
        if os.path.abspath(fs.filename).startswith(folder):
            return fs
    stdlib = os.path.dirname(os.__file__) + os.sep
    for fs in reversed(tb):
        fn = os.path.abspath(fs.filename)
        if (not fn.startswith(_PKG_DIR) and not fn.startswith(stdlib) and "site-packages" not in fn
                and not fs.filename.startswith("<")):
            return fs
    return None


def failure(e: BaseException, path: str, tunables: object) -> str:
    """What a failed compile of profile `path` says: a `ProfileError`'s message, the
    profile's argparse rejecting `tunables` (`SystemExit` with a non-zero code; a zero or
    empty code is its `--help`), or any other exception at the innermost frame of the
    profile's own files."""
    if isinstance(e, ProfileError):
        return str(e)
    if isinstance(e, SystemExit):
        if e.code in (0, None):
            return f"{path}: the profile printed its help and produced no profile"
        return f"{path}: the profile rejected its tunables {tunables} (exit status {e.code})"
    fs = _user_frame(traceback.extract_tb(e.__traceback__), path)
    where = f"{fs.filename}:{fs.lineno}: " if fs is not None else f"{path}: "
    return f"{where}{type(e).__name__}: {e}"


def main(argv: Optional[List[str]] = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in args_in:
        i = args_in.index("--")
        args_in, extra = args_in[:i], args_in[i + 1:]
    ap = argparse.ArgumentParser(prog="python3 -m squall.compile",
                                 description="Compile a Python traffic profile to Squall's JSON IR.")
    ap.add_argument("profile", help="the profile file (.py)")
    ap.add_argument("-t", dest="tunables", action="append", default=[], metavar="KEY=VALUE",
                    help="tunable passed to get_profile (repeatable, or comma-separated)")
    ap.add_argument("--out", help="write the IR to this file instead of stdout")
    ap.add_argument("--compact", action="store_true", help="one-line JSON")
    try:
        ns = ap.parse_args(args_in)
    except SystemExit as e:
        return EXIT_OK if e.code == 0 else EXIT_USAGE
    try:
        tunables = parse_tunables(ns.tunables)
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    path: str = ns.profile
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        _err(f"{path}: no such readable file")
        return EXIT_USAGE

    from .loader import compile_profile

    captured = io.StringIO()
    try:
        with redirect_stdout(captured):  # keep stdout for the IR only
            ir = compile_profile(path, tunables, extra)
    except ProfileError as e:
        sys.stderr.write(captured.getvalue())
        _err(failure(e, path, tunables or extra))
        return EXIT_PROFILE
    except SystemExit as e:  # the profile's argparse: --help (0) or a rejected tunable (2)
        sys.stderr.write(captured.getvalue())
        if e.code in (0, None):
            return EXIT_HELP
        _err(failure(e, path, tunables or extra))
        return EXIT_PROFILE
    except Exception as e:  # noqa: BLE001 - any bug in the profile's own code
        sys.stderr.write(captured.getvalue())
        _err(failure(e, path, tunables or extra))
        for line in traceback.format_exception(type(e), e, e.__traceback__):
            for sub in line.rstrip("\n").split("\n"):
                sys.stderr.write(f"  {sub}\n")
        return EXIT_PROFILE
    sys.stderr.write(captured.getvalue())  # what the profile printed goes to stderr
    text = json.dumps(ir, separators=(",", ":")) if ns.compact else json.dumps(ir, indent=2)
    if ns.out:
        try:
            with open(ns.out, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as e:
            _err(f"{ns.out}: {e.strerror}")
            return EXIT_USAGE
    else:
        sys.stdout.write(text + "\n")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
