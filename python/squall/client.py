"""`squall.Client`: drive a running `squall daemon` over its JSON-RPC 2.0 control API.

The method names follow TRex's `ASTFClient` where they map (`connect`, `load_profile`,
`start`, `update`, `stop`, `wait_on_traffic`, `get_stats`, `get_warnings`, `clear_stats`,
`disconnect`); see docs/PYTHON.md ("Client") for the differences and docs/API.md for the
protocol. Standard library only.

    from squall import Client
    with Client(port=4501) as c:
        c.load_profile("examples/w1-astf-http.py")
        c.start(mult=100, duration=10)
        c.wait_on_traffic(timeout=60)
        print(c.get_stats()["client"]["flows"]["completed"])
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import socket
import sys
import time
from typing import Any, Dict, List, Mapping, NoReturn, Optional, Union

__all__ = ["Client", "ClientError", "ProfileLoadError"]

# Error codes of the control API (docs/API.md).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
NO_PROFILE = -32000
ALREADY_RUNNING = -32001
INVALID_PROFILE = -32002
NOT_RUNNING = -32003
RUN_FAILED = -32004

# The longest request line the daemon reads (bytes, without the newline); a longer one
# gets a -32700 error and the connection is closed.
MAX_REQUEST = 16 << 20

# The longest a single `wait_on_traffic` request blocks the daemon-side (seconds); longer
# waits are made of several requests.
_WAIT_CHUNK = 5.0

Tunables = Union[Mapping[str, Any], None]


class ClientError(Exception):
    """A JSON-RPC error returned by the daemon (or a connection failure, code `None`)."""

    def __init__(self, message: str, code: Optional[int] = None, data: Any = None) -> None:
        super().__init__(message if code is None else f"[{code}] {message}")
        self.code = code
        self.message = message
        self.data = data


class ProfileLoadError(ClientError):
    """The daemon refused the profile: `errors` lists `{"path", "message"}` items."""

    @property
    def errors(self) -> List[Dict[str, str]]:
        if isinstance(self.data, dict):
            errs = self.data.get("errors")
            if isinstance(errs, list):
                return errs
        return []

    def __str__(self) -> str:
        lines = [super().__str__()]
        lines += [f"  {e.get('path', '?')}: {e.get('message', '')}" for e in self.errors]
        return "\n".join(lines)


def _load_error(message: str, detail: str) -> NoReturn:
    """A profile refused here (as the daemon refuses one): `ProfileLoadError` with code
    -32002 and one error at path `.` (the whole profile)."""
    raise ProfileLoadError(message, INVALID_PROFILE,
                           {"errors": [{"path": ".", "message": detail}]})


def _compile_py(path: str, tunables: Mapping[str, str]) -> Dict[str, Any]:
    """Compile a `.py` profile in this process, as `python3 -m squall.compile` does: any
    failure of the profile (a `ProfileError`, its argparse rejecting the tunables, an
    exception in its code) becomes a `ProfileLoadError`."""
    from .compile import failure
    from .loader import compile_profile

    if not os.path.isfile(path):
        _load_error(f"cannot read {path}", f"{path}: no such file")
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return compile_profile(path, tunables)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - ProfileError, argparse, bugs
        said = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        rejected = isinstance(e, SystemExit) and e.code not in (0, None)
        why = f": {said[-1].strip()}" if rejected and said else ""
        _load_error("profile compilation failed", failure(e, path, dict(tunables)) + why)
    finally:
        sys.stderr.write(err.getvalue())  # what the profile wrote is not lost


def _profile_ir(profile: Any, tunables: Tunables) -> Dict[str, Any]:
    """The JSON IR dict of an `ASTFProfile`, a `.py`/`.json` path or a dict."""
    from .errors import ProfileError

    is_path = isinstance(profile, (str, os.PathLike))
    path = os.fspath(profile) if is_path else ""
    if tunables and not (is_path and path.endswith(".py")):
        what = "a JSON profile" if is_path else f"a profile given as {type(profile).__name__}"
        raise ValueError(f"tunables apply to a .py profile path only (compiled here); {what} "
                         "takes none: edit its values instead")
    if isinstance(profile, dict):
        return profile
    if is_path:
        if path.endswith(".py"):
            tun = {str(k): str(v) for k, v in (tunables or {}).items()}
            return _compile_py(path, tun)
        try:
            with open(path, encoding="utf-8") as f:
                ir = json.load(f)
        except OSError as e:
            _load_error(f"cannot read {path}: {e.strerror}", f"{path}: {e.strerror}")
        except ValueError as e:  # json.JSONDecodeError, or not UTF-8
            pos = (f"line {e.lineno} column {e.colno}: {e.msg}"
                   if isinstance(e, json.JSONDecodeError) else str(e))
            _load_error("profile is not valid JSON", pos)
        if not isinstance(ir, dict):
            _load_error("profile is not a JSON object", f"{path}: the profile must be a JSON object")
        return ir
    to_json = getattr(profile, "to_json", None)
    if callable(to_json):
        try:
            ir = to_json()
        except ProfileError as e:
            _load_error("invalid profile", str(e))
        if isinstance(ir, dict):
            return ir
    raise TypeError("profile must be an ASTFProfile, a .py/.json path or an IR dict")


def _over_ipv6(ir: Dict[str, Any]) -> Dict[str, Any]:
    """`ir` with every template's flows over IPv6: TRex's `ipv6.enable` set to 1 in
    `global.ipv6` and wherever a client side sets it (`global.client.ipv6`, a template's
    `client_tunables.ipv6`), so that no template stays IPv4. The `src_msb`/`dst_msb` the
    profile gives are kept (default `::`); native IPv6 pools are IPv6 already."""
    out = copy.deepcopy(ir)
    glob = out.setdefault("global", {})
    glob.setdefault("ipv6", {})["enable"] = 1
    sections = [glob.get("client")] + [t.get("client_tunables") for t in out.get("templates", [])]
    for sec in sections:
        if isinstance(sec, dict) and isinstance(sec.get("ipv6"), dict) and "enable" in sec["ipv6"]:
            sec["ipv6"]["enable"] = 1
    return out


class Client:
    """A connection to a `squall daemon` (TCP on `server:port`, or the unix socket `unix`)."""

    def __init__(self, server: str = "127.0.0.1", port: int = 4501,
                 unix: Optional[str] = None, timeout: float = 30.0) -> None:
        self.server = server
        self.port = port
        self.unix = unix
        self.timeout = timeout
        self._sock: Optional[socket.socket] = None
        self._rfile: Any = None
        # (connect()'s api_version call: never sent twice)
        self._handshake = False
        self._id = 0
        # The IR this client loaded last, and whether the daemon holds its IPv6 variant
        # (`start(ipv6=True)`).
        self._ir: Optional[Dict[str, Any]] = None
        self._loaded_ipv6 = False

    # ---- connection --------------------------------------------------------------------

    def connect(self) -> None:
        """Connect to the daemon and check the API version."""
        if self._sock is not None:
            return
        try:
            if self.unix is not None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(self.timeout)
                s.connect(self.unix)
            else:
                s = socket.create_connection((self.server, self.port), timeout=self.timeout)
        except OSError as e:
            where = self.unix if self.unix is not None else f"{self.server}:{self.port}"
            raise ClientError(f"cannot connect to the squall daemon at {where}: {e}") from e
        self._sock = s
        self._rfile = s.makefile("rb")
        self._handshake = True
        try:
            v = self.api_version()
        except ClientError:  # e.g. "too many connections" (the daemon then closes)
            self.disconnect()
            raise
        finally:
            self._handshake = False
        if not str(v.get("api_version", "")).startswith("1."):
            self.disconnect()
            raise ClientError(f"unsupported daemon API version {v.get('api_version')!r}")

    def disconnect(self) -> None:
        """Close the connection (the daemon and any run keep going)."""
        if self._rfile is not None:
            self._rfile.close()
            self._rfile = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def is_connected(self) -> bool:
        return self._sock is not None

    def __enter__(self) -> "Client":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None,
             timeout: Optional[float] = None) -> Any:
        """Send one request (named `params`) and return its `result`; raises `ClientError`
        on an error response. `timeout`: socket timeout for this call (seconds). Raises
        `ValueError` for a NaN or infinite number in `params` (JSON has none), and
        `ClientError` (code `None`, nothing sent) for a request over the daemon's 16 MiB."""
        if self._sock is None:
            raise ClientError("not connected (call connect() first)")
        self._id += 1
        rid = self._id  # (a reconnection in between makes requests of its own)
        req = {"jsonrpc": "2.0", "id": rid, "method": method, "params": dict(params or {})}
        try:
            text = json.dumps(req, separators=(",", ":"), allow_nan=False)
        except ValueError as e:
            raise ValueError(f"{method}: a parameter is NaN or infinite, which JSON cannot "
                             f"carry ({e})") from e
        line = (text + "\n").encode()
        if len(line) - 1 > MAX_REQUEST:
            raise ClientError(f"{method}: the request is {len(line) - 1} bytes, over the "
                              f"daemon's limit of {MAX_REQUEST} bytes (16 MiB) per request; "
                              "not sent")
        raw = self._exchange(method, line, timeout)
        try:
            resp = json.loads(raw)
        except ValueError:
            resp = None
        err = resp.get("error") if isinstance(resp, dict) else None
        # An error with a null id answers the request the daemon could not read (parse
        # error, line too long, too many connections).
        null_id_error = isinstance(resp, dict) and resp.get("id") is None and isinstance(err, dict)
        if not isinstance(resp, dict) or (resp.get("id") != rid and not null_id_error):
            raise ClientError(f"{method}: unexpected response {raw[:200]!r}")
        if isinstance(err, dict):
            code = err.get("code")
            cls = ProfileLoadError if code == INVALID_PROFILE else ClientError
            raise cls(str(err.get("message", "")), code if isinstance(code, int) else None,
                      err.get("data"))
        return resp.get("result")

    def _exchange(self, method: str, line: bytes, timeout: Optional[float]) -> bytes:
        """Sends `line` and reads the answer's line. The daemon answers every request it
        reads before it closes a connection (even a bad one), so a close with no answer
        means it did not read this one — it ends connections that wait idle when all its
        slots are taken: then the request is sent once more on a new connection. Not
        during the connection's own handshake, and not for the requests that change the
        run (`start`, `stop`, `shutdown`): those are never sent twice."""
        retry = not self._handshake and method not in ("start", "stop", "shutdown")
        for attempt in (0, 1) if retry else (1,):
            assert self._sock is not None and self._rfile is not None
            try:
                self._sock.settimeout(timeout if timeout is not None else self.timeout)
                self._sock.sendall(line)
                raw: bytes = self._rfile.readline()
            except (BrokenPipeError, ConnectionResetError):
                raw = b""
            except OSError as e:  # a timeout among them: the request may be running
                self.disconnect()
                raise ClientError(f"{method}: connection to the daemon failed: {e}") from e
            if raw:
                return raw
            self.disconnect()
            if attempt == 1:
                break
            self.connect()
        raise ClientError(f"{method}: the daemon closed the connection")

    def _dict(self, method: str, params: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        r = self.call(method, params)
        if not isinstance(r, dict):
            raise ClientError(f"{method}: unexpected result {r!r}")
        return r

    # ---- methods -----------------------------------------------------------------------

    def api_version(self) -> Dict[str, Any]:
        """`{"api_version", "server", "version"}` of the daemon."""
        return self._dict("api_version")

    def load_profile(self, profile: Any, tunables: Tunables = None) -> Dict[str, Any]:
        """Load a profile: an `ASTFProfile`, a path to a `.py` (compiled here, with
        `tunables` passed to `get_profile`) or `.json` file, or an IR dict. Raises
        `ProfileLoadError` (with `.errors`, each a JSON path and a message) if invalid or
        if the `.py` profile fails to compile here, and `ValueError` for `tunables` with
        anything but a `.py` path."""
        ir = _profile_ir(profile, tunables)
        r = self._dict("load_profile", {"profile": ir})
        self._ir, self._loaded_ipv6 = ir, False
        return r

    def start(self, mult: float = 1.0, duration: float = -1.0, cores: Optional[int] = None,
              sim: bool = False, impair: Optional[str] = None,
              drain_sec: Optional[float] = None, seed: Optional[int] = None,
              ipv6: bool = False) -> Dict[str, Any]:
        """Start generating: every template at `cps * mult`, for `duration` seconds
        (-1: until `stop`). `cores`: on the in-memory wire 1 or 2 (client and server
        threads), on a daemon started with real ports the number of workers; `sim` for
        the virtual-clock simulation and `impair` as `squall run --impair` (both the
        in-memory wire's). `ipv6` (TRex's "convert traffic to IPv6"):
        this run's flows all go over IPv6, as if the profile set `ipv6.enable` 1 for every
        template; the client loads that variant of the profile it loaded before starting
        (and the profile itself again at the next `start` without `ipv6`)."""
        if ipv6 or self._loaded_ipv6:
            if self._ir is None:
                raise ClientError("start(ipv6=True) needs a profile loaded by this client "
                                  "(load_profile)")
            ir = _over_ipv6(self._ir) if ipv6 else self._ir
            self._dict("load_profile", {"profile": ir})
            self._loaded_ipv6 = ipv6
        params: Dict[str, Any] = {"mult": mult, "duration": duration, "sim": sim}
        for k, v in (("cores", cores), ("impair", impair), ("drain_sec", drain_sec),
                     ("seed", seed)):
            if v is not None:
                params[k] = v
        return self._dict("start", params)

    def update(self, mult: float) -> None:
        """Change the rate multiplier of the running traffic."""
        self.call("update", {"mult": mult})

    def stop(self, block: bool = True, drain: bool = True, timeout: Optional[float] = None) -> None:
        """Stop opening flows; in-flight flows finish (`drain`) or are cut. With `block`,
        wait until the run has ended."""
        try:
            self.call("stop", {"drain": drain})
        except ClientError as e:
            if e.code != NOT_RUNNING:
                raise
        if block:
            self.wait_on_traffic(timeout=timeout)

    def wait_on_traffic(self, timeout: Optional[float] = None) -> None:
        """Block until the run ends; raise `TimeoutError` after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            chunk = _WAIT_CHUNK
            if deadline is not None:
                chunk = max(0.0, min(chunk, deadline - time.monotonic()))
            r = self.call("wait_on_traffic", {"timeout": chunk}, timeout=self.timeout + chunk)
            if not isinstance(r, dict):
                raise ClientError(f"wait_on_traffic: unexpected result {r!r}")
            if r.get("finished"):
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"traffic still {r.get('state')} after {timeout} s")

    def is_traffic_active(self) -> bool:
        return self.get_status().get("state") in ("running", "stopping")

    def get_status(self) -> Dict[str, Any]:
        """`{"state": idle|running|stopping|done, "profile_loaded", ...}`."""
        return self._dict("get_status")

    def get_stats(self) -> Dict[str, Any]:
        """Live counters in the shape of `squall run --json` (plus `state` and `live`)."""
        return self._dict("get_stats")

    def clear_stats(self) -> None:
        """Zero the counters seen by `get_stats` (latency histograms are kept)."""
        self.call("clear_stats")

    def get_warnings(self) -> List[str]:
        """Invariant violations, error counts and run failures of the current run."""
        r = self.call("get_warnings")
        return [str(w) for w in r] if isinstance(r, list) else []

    def shutdown(self) -> None:
        """Stop any run and end the daemon process."""
        self.call("shutdown")
        self.disconnect()
