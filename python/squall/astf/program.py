"""`ASTFProgram`: the per-flow emulation program (TRex names and signatures).

A program is a list of instructions. Each records the user's file:line when it is
added, so errors found while compiling (an undefined label, a TCP instruction in a UDP
program, ...) still point at the call that caused them. `to_ir()` emits the JSON IR
`program` object (docs/PROFILE.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import ProfileError, Site, user_site

BytesLike = Union[bytes, bytearray, str]

U32_MAX = 2**32 - 1
MAX_BUFFER = 64 * 1024 * 1024
MAX_DATAGRAM = 65507
MAX_VARS = 4
MAX_COMMANDS = 65000
_NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,64}$")

# Instruction -> transport it belongs to (None: both).
_TRANSPORT = {
    "send": "tcp", "recv": "tcp", "connect": "tcp", "accept": "tcp", "reset": "tcp",
    "wait_for_peer_close": "tcp", "set_send_blocking": "tcp",
    "http_request": "tcp", "http_wait_response": "tcp",
    "send_msg": "udp", "recv_msg": "udp", "set_keepalive_msg": "udp",
}
# Instructions that wait (a loop must enclose one: `_check_loops`, as the engine's loader).
WAITING = {"send", "recv", "delay", "delay_rand", "recv_msg", "connect", "accept", "wait_for_peer_close",
           "http_wait_response"}
# How an HTTP request part chooses among alternatives (IR `pick`).
HTTP_PICKS = ("round_robin", "random", "weighted", "flow")
_HTTP_TOKEN_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


def to_bytes(what: str, buf: object, site: Optional[Site]) -> bytes:
    """`str` (encoded as UTF-8), `bytes` or `bytearray` as bytes."""
    if isinstance(buf, (bytes, bytearray)):
        return bytes(buf)
    if isinstance(buf, str):
        return buf.encode("utf-8")
    raise ProfileError(f"{what} must be bytes or str, got {type(buf).__name__}", site, what)


def check_int(what: str, val: object, lo: int, hi: int, site: Optional[Site]) -> int:
    if isinstance(val, bool) or not isinstance(val, int):
        raise ProfileError(f"{what} must be an integer, got {type(val).__name__} {val!r}", site, what)
    if not lo <= val <= hi:
        raise ProfileError(f"{what} = {val} is out of range {lo}..={hi}", site, what)
    return val


def check_usec(what: str, val: object, site: Optional[Site]) -> int:
    """A microsecond count (int or float, TRex accepts both) as a u32."""
    if isinstance(val, bool) or not isinstance(val, (int, float)) or not math.isfinite(val):
        raise ProfileError(f"{what} must be a number of microseconds, got {val!r}", site, what)
    v = int(round(val))
    if not 0 <= v <= U32_MAX:
        raise ProfileError(f"{what} = {val} is out of range 0..={U32_MAX} microseconds", site, what)
    return v


@dataclass(frozen=True)
class Buffer:
    """Payload bytes: `data`, optionally extended to `size` bytes with `fill` repeated."""

    data: bytes
    size: int = 0
    fill: Optional[bytes] = None

    @property
    def length(self) -> int:
        return max(self.size, len(self.data))

    def to_ir(self, name: str) -> Dict[str, Any]:
        d: Dict[str, Any] = {"name": name}
        if self.data:
            d.update(encode_bytes(self.data))
        if self.size > len(self.data):
            d["size"] = self.size
            if self.fill is not None:
                d["fill"] = encode_bytes(self.fill)
        return d


def encode_bytes(data: bytes) -> Dict[str, str]:
    """`{"text": ...}` for readable UTF-8, else `{"base64": ...}`."""
    import base64

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(c.isprintable() or c in "\r\n\t" for c in text):
        return {"text": text}
    return {"base64": base64.b64encode(data).decode("ascii")}


def make_buffer(what: str, buf: object, size: object, fill: object, site: Optional[Site],
                limit: int) -> Buffer:
    data = to_bytes(what, buf, site)
    sz = check_int("size", size, 0, limit, site) if size else 0
    fb: Optional[bytes] = None
    if fill is not None:
        fb = to_bytes("fill", fill, site)
        if not fb:
            raise ProfileError("fill must not be empty", site, "fill")
    total = max(sz, len(data))
    if total == 0:
        raise ProfileError(f"{what}: empty buffer (give bytes, or a size)", site, what)
    if total > limit:
        raise ProfileError(f"{what}: {total} bytes is more than the limit of {limit}", site, what)
    return Buffer(data, sz if sz > len(data) else 0, fb if sz > len(data) else None)


@dataclass
class Instr:
    """One program entry: the IR `op`, its plain fields, and what must be resolved later."""

    op: str
    site: Optional[Site]
    args: Dict[str, Any] = field(default_factory=dict)
    buf: Optional[Buffer] = None
    var: Optional[str] = None
    label: Optional[str] = None


class ASTFCmd:
    """Base of the command objects TRex lets profiles pass around (`ASTFCmdDelay`, ...)."""

    def __init__(self, instr: Instr) -> None:
        self.instr = instr


class ASTFCmdDelay(ASTFCmd):
    """A `delay` command object, e.g. for `s_delay=ASTFCmdDelay(1000)`."""

    def __init__(self, usec: Union[int, float]) -> None:
        site = user_site()
        super().__init__(Instr("delay", site, {"usec": check_usec("usec", usec, site)}))


def _one(stream: bool, build: Callable[["ASTFProgram"], None]) -> Instr:
    """The instruction one call of an `ASTFProgram` method makes (checked as the method
    checks it), for TRex's command objects."""
    p = ASTFProgram(stream=stream)
    build(p)
    return p.instrs[-1]


def _watermark(op: str, field: str, value: int, clear: bool) -> Instr:
    """A receive instruction of TRex's command form: `value` is the watermark itself
    (TRex's `recv`/`recv_msg` methods accumulate theirs into it)."""
    site = user_site()
    n = check_int(field, value, 1, U32_MAX, site)
    args: Dict[str, Any] = {"bytes" if op == "recv" else "count": n}
    if clear:
        args["clear"] = True
    return Instr(op, site, args)


class ASTFCmdSend(ASTFCmd):
    """TRex's `send` command object (`ASTFProgram(commands=[...])`)."""

    def __init__(self, buf: BytesLike) -> None:
        super().__init__(_one(True, lambda p: p.send(buf)))


class ASTFCmdRecv(ASTFCmd):
    """TRex's `recv` command object: wait until the flow's received bytes reach
    `min_bytes` (the watermark itself, as in TRex's command form)."""

    def __init__(self, min_bytes: int, clear: bool = False) -> None:
        super().__init__(_watermark("recv", "min_bytes", min_bytes, clear))


class ASTFCmdTxPkt(ASTFCmd):
    """TRex's `send_msg` command object (one datagram)."""

    def __init__(self, buf: BytesLike) -> None:
        super().__init__(_one(False, lambda p: p.send_msg(buf)))


class ASTFCmdRecvMsg(ASTFCmd):
    """TRex's `recv_msg` command object: wait until the flow's received datagrams reach
    `min_pkts` (the watermark itself)."""

    def __init__(self, min_pkts: int, clear: bool = False) -> None:
        super().__init__(_watermark("recv_msg", "min_pkts", min_pkts, clear))


class ASTFCmdKeepaliveMsg(ASTFCmd):
    """TRex's `set_keepalive_msg` command object."""

    def __init__(self, msec: int) -> None:
        super().__init__(_one(False, lambda p: p.set_keepalive_msg(msec)))


class ASTFCmdCloseMsg(ASTFCmd):
    """TRex's `close_msg` command object (UDP)."""

    def __init__(self) -> None:
        super().__init__(Instr("close", user_site()))


class ASTFCmdReset(ASTFCmd):
    """TRex's `reset` command object."""

    def __init__(self) -> None:
        super().__init__(Instr("reset", user_site()))


class ASTFCmdNoClose(ASTFCmd):
    """TRex's `wait_for_peer_close` command object (its `nc`)."""

    def __init__(self) -> None:
        super().__init__(Instr("wait_for_peer_close", user_site()))


class ASTFCmdConnect(ASTFCmd):
    """TRex's `connect` command object."""

    def __init__(self) -> None:
        super().__init__(Instr("connect", user_site()))


class ASTFCmdTxMode(ASTFCmd):
    """TRex's `set_send_blocking` command object: `flags` 0 blocking, 1 not."""

    def __init__(self, flags: int) -> None:
        site = user_site()
        f = check_int("flags", flags, 0, 1, site)
        super().__init__(_one(True, lambda p: p.set_send_blocking(f == 0)))


class ASTFCmdDelayRnd(ASTFCmd):
    """A `delay_rand` command object, e.g. for `s_delay=ASTFCmdDelayRnd(100, 2000)`."""

    def __init__(self, min_usec: Union[int, float], max_usec: Union[int, float]) -> None:
        site = user_site()
        lo = check_usec("min_usec", min_usec, site)
        hi = check_usec("max_usec", max_usec, site)
        if lo > hi:
            raise ProfileError(f"delay_rand: min_usec {min_usec} is bigger than max_usec {max_usec}",
                               site, "min_usec")
        super().__init__(Instr("delay_rand", site, {"min_usec": lo, "max_usec": hi}))


class ASTFProgram:
    """An L7 emulation program, run by every flow of a template on one side.

    ```
    prog_c = ASTFProgram()
    prog_c.send(http_req)
    prog_c.recv(len(http_response))
    ```
    `ASTFProgram(file="x.pcap", side="c")` builds the program from a capture instead
    (see `squall.astf.capture`). `stream=False` makes a UDP program.
    """

    MIN_DELAY = 50
    MAX_DELAY = 700000
    MAX_KEEPALIVE = 500000

    def __init__(self, file: Optional[str] = None, side: str = "c",
                 commands: Optional[Union[ASTFCmd, Sequence[ASTFCmd]]] = None, stream: bool = True,
                 s_delay: Optional[ASTFCmd] = None, udp_mtu: Optional[int] = None) -> None:
        self.site = user_site()
        self._init(file, side, commands, stream, s_delay, udp_mtu, None)

    @classmethod
    def from_conversation(cls, conv: Any, side: str, site: Optional[Site],
                          s_delay: Optional[ASTFCmd] = None, udp_mtu: Optional[int] = None) -> "ASTFProgram":
        """The `side` program of an already loaded `capture.Conversation`."""
        prog = cls.__new__(cls)
        prog.site = site
        prog._init(None, side, None, conv.transport == "tcp", s_delay, udp_mtu, conv)
        return prog

    def _init(self, file: Optional[str], side: str, commands: Optional[Union[ASTFCmd, Sequence[ASTFCmd]]],
              stream: bool, s_delay: Optional[ASTFCmd], udp_mtu: Optional[int], conv: Any) -> None:
        if side not in ("c", "s"):
            raise ProfileError(f"ASTFProgram: side must be 'c' or 's', got {side!r}", self.site, "side")
        if not isinstance(stream, bool):
            raise ProfileError("ASTFProgram: stream must be a bool", self.site, "stream")
        if s_delay is not None and not isinstance(s_delay, (ASTFCmdDelay, ASTFCmdDelayRnd)):
            raise ProfileError("ASTFProgram: s_delay must be ASTFCmdDelay or ASTFCmdDelayRnd",
                               self.site, "s_delay")
        if udp_mtu is not None:
            check_int("udp_mtu", udp_mtu, 43, 65535, self.site)
        self.stream = stream
        self.instrs: List[Instr] = []
        self.vars: Dict[str, int] = {}
        self.labels: Dict[str, int] = {}
        self.total_send_bytes = 0
        self.total_rcv_bytes = 0
        self._payload_len = 0
        self.s_delay = s_delay
        self.udp_mtu = udp_mtu
        self.side = side
        self.server_port: Optional[int] = None
        if file is not None:
            from .capture import load_conversation, resolve_path

            conv = load_conversation(resolve_path(file, self.site), self.site)
        if conv is not None:
            self._load_conversation(conv, side, s_delay, udp_mtu)
        elif commands is not None:
            cmds = [commands] if isinstance(commands, ASTFCmd) else list(commands)
            for c in cmds:
                if not isinstance(c, ASTFCmd):
                    raise ProfileError("ASTFProgram: commands must be ASTFCmd objects", self.site, "commands")
            # A UDP command makes a UDP program, as TRex takes each command's transport.
            if any(_TRANSPORT.get(c.instr.op) == "udp" for c in cmds):
                self.stream = False
            for c in cmds:
                self._add(Instr(c.instr.op, c.instr.site, dict(c.instr.args), c.instr.buf,
                                c.instr.var, c.instr.label))

    # ---- internals -------------------------------------------------------------------

    def _add(self, ins: Instr) -> None:
        want = _TRANSPORT.get(ins.op)
        mine = "tcp" if self.stream else "udp"
        if want is not None and want != mine:
            hint = ("create the program with ASTFProgram(stream=False)" if want == "udp"
                    else "this program was created with stream=False (UDP)")
            raise ProfileError(f"{ins.op} is a {want.upper()} instruction but this is a "
                               f"{mine.upper()} program: {hint}", ins.site, ins.op)
        if len(self.instrs) >= MAX_COMMANDS:
            raise ProfileError(f"program has more than {MAX_COMMANDS} commands", ins.site)
        self.instrs.append(ins)

    def _var(self, name: object, site: Optional[Site], define: bool) -> str:
        if not isinstance(name, str) or not name:
            raise ProfileError(f"variable name must be a non-empty string, got {name!r}", site, "var_id")
        if define and name not in self.vars:
            if len(self.vars) >= MAX_VARS:
                raise ProfileError(f"too many flow variables: {name!r} would be the "
                                   f"{len(self.vars) + 1}th, at most {MAX_VARS} "
                                   f"({', '.join(self.vars)})", site, "var_id")
            self.vars[name] = len(self.vars)
        return name

    # ---- TCP -------------------------------------------------------------------------

    def send(self, buf: BytesLike, size: int = 0, fill: Optional[BytesLike] = None) -> None:
        """Send `buf` on the stream (padded to `size` bytes with `fill` when bigger)."""
        site = user_site()
        b = make_buffer("buf", buf, size, fill, site, MAX_BUFFER)
        self._add(Instr("send", site, buf=b))
        self.total_send_bytes += b.length

    def send_chunk(self, l7_buf: BytesLike, chunk_size: int, delay_usec: int) -> None:
        """Send `l7_buf` in pieces of `chunk_size` bytes with a delay between them."""
        site = user_site()
        data = to_bytes("l7_buf", l7_buf, site)
        check_int("chunk_size", chunk_size, 1, MAX_BUFFER, site)
        d = check_usec("delay_usec", delay_usec, site)
        for i in range(0, len(data), chunk_size):
            b = make_buffer("l7_buf", data[i:i + chunk_size], 0, None, site, MAX_BUFFER)
            self._add(Instr("send", site, buf=b))
            self.total_send_bytes += b.length
            if d:
                self._add(Instr("delay", site, {"usec": d}))

    def recv(self, bytes: int, clear: bool = False) -> None:  # noqa: A002 - TRex's name
        """Wait until `bytes` more bytes have been received (watermarks are cumulative)."""
        site = user_site()
        n = check_int("bytes", bytes, 0, U32_MAX, site)
        total = self.total_rcv_bytes + n
        if n < 1:
            # The engine's watermarks must rise between clears.
            raise ProfileError("recv(0) waits for nothing (give the bytes to wait for)", site, "bytes")
        if total > U32_MAX:
            raise ProfileError(f"recv watermark {total} exceeds {U32_MAX}; use clear=True in loops",
                               site, "bytes")
        args: Dict[str, Any] = {"bytes": total}
        if clear:
            args["clear"] = True
        self._add(Instr("recv", site, args))
        self.total_rcv_bytes = 0 if clear else total

    def connect(self) -> None:
        """Client: wait until the connection is established."""
        self._add(Instr("connect", user_site()))

    def accept(self) -> None:
        """Server: wait until the connection is established."""
        self._add(Instr("accept", user_site()))

    def reset(self) -> None:
        """Abort the connection with RST; ends the program."""
        self._add(Instr("reset", user_site()))

    def wait_for_peer_close(self) -> None:
        """Wait for the peer's FIN, then close."""
        self._add(Instr("wait_for_peer_close", user_site()))

    def set_send_blocking(self, block: bool) -> None:
        """Blocking sends (default) complete when acknowledged; non-blocking when queued."""
        site = user_site()
        if not isinstance(block, bool):
            raise ProfileError("set_send_blocking: block must be a bool", site, "block")
        self._add(Instr("set_send_blocking", site, {"block": block}))

    def http_request(self, method: str = "GET", url: Union[str, Sequence[str]] = "/",
                     headers: Optional[Mapping[str, Union[str, Sequence[str]]]] = None,
                     body: Optional[BytesLike] = None, pick: Optional[str] = None,
                     weights: Optional[Sequence[int]] = None,
                     header_pick: Optional[Mapping[str, str]] = None,
                     version: str = "1.1") -> None:
        """Send an HTTP request and expect its response (does not wait: see
        `http_wait_response`). `url` is one target or a list chosen per request by `pick`
        ("round_robin" by default, "random", "weighted" with `weights`, "flow"). A header
        value may be a list, chosen per flow unless `header_pick[name]` says otherwise.
        `body` adds `Content-Length`. The request is sent as shared immutable pieces."""
        site = user_site()
        if not isinstance(method, str) or not _HTTP_TOKEN_RE.fullmatch(method):
            raise ProfileError(f"http_request: {method!r} is not an HTTP method", site, "method")
        if version not in ("1.1", "1.0"):
            raise ProfileError(f"http_request: version must be \"1.1\" or \"1.0\", got {version!r}",
                               site, "version")
        urls = [url] if isinstance(url, str) else list(url)
        if not urls or not all(isinstance(u, str) and u and all(0x21 <= ord(c) <= 0x7e for c in u)
                               for u in urls):
            raise ProfileError(f"http_request: url must be a request target or a non-empty list of them "
                               f"(visible ASCII, no spaces), got {url!r}", site, "url")
        args: Dict[str, Any] = {"method": method}
        if len(urls) == 1 and isinstance(url, str):
            args["url"] = urls[0]
        else:
            args["urls"] = urls
        if pick is not None or weights is not None:
            p = pick if pick is not None else "weighted"
            if p not in HTTP_PICKS:
                raise ProfileError(f"http_request: pick must be one of {', '.join(HTTP_PICKS)}, got {p!r}",
                                   site, "pick")
            if isinstance(url, str):
                raise ProfileError("http_request: pick and weights choose among a list of urls", site, "pick")
            if weights is not None and p != "weighted":
                raise ProfileError(f"http_request: weights go with pick=\"weighted\", not {p!r}", site,
                                   "weights")
            args["pick"] = p
            if weights is not None:
                w = [check_int("weights", x, 0, U32_MAX, site) for x in weights]
                if len(w) != len(urls) or sum(w) < 1:
                    raise ProfileError(f"http_request: {len(w)} weights for {len(urls)} urls "
                                       f"(one each, not all zero)", site, "weights")
                if sum(w) > U32_MAX:
                    raise ProfileError(f"http_request: weights must add up to 1..2^32-1, not {sum(w)}",
                                       site, "weights")
                args["weights"] = w
            elif p == "weighted":
                raise ProfileError("http_request: pick=\"weighted\" needs weights", site, "weights")
        hdrs: List[Dict[str, Any]] = []
        picks = dict(header_pick or {})
        for name, val in (headers or {}).items():
            if not isinstance(name, str) or not _HTTP_TOKEN_RE.fullmatch(name):
                raise ProfileError(f"http_request: {name!r} is not a header name", site, "headers")
            if name.lower() in ("content-length", "transfer-encoding"):
                raise ProfileError(f"http_request: {name} is set from the body", site, "headers")
            vals = [val] if isinstance(val, str) else list(val)
            if not vals or not all(isinstance(v, str) and all(c == "\t" or 0x20 <= ord(c) <= 0x7e for c in v)
                                   for v in vals):
                raise ProfileError(f"http_request: header {name}: a value or a non-empty list of values "
                                   f"of visible ASCII, spaces and tabs (no line breaks or other control "
                                   f"characters), got {val!r}", site, "headers")
            h: Dict[str, Any] = {"name": name}
            if isinstance(val, str):
                h["value"] = val
            else:
                h["values"] = vals
            if name in picks:
                hp = picks.pop(name)
                if hp not in HTTP_PICKS or hp == "weighted":
                    raise ProfileError(f"http_request: header_pick[{name!r}] must be round_robin, random "
                                       f"or flow, got {hp!r}", site, "header_pick")
                h["pick"] = hp
            hdrs.append(h)
        if picks:
            raise ProfileError(f"http_request: header_pick names headers not given: {', '.join(picks)}",
                               site, "header_pick")
        if version == "1.1" and not any(h["name"].lower() == "host" for h in hdrs):
            raise ProfileError("http_request: an HTTP/1.1 request needs a Host header "
                               "(headers={\"Host\": ...})", site, "headers")
        if hdrs:
            args["headers"] = hdrs
        if version != "1.1":
            args["version"] = version
        b = make_buffer("body", body, 0, None, site, MAX_BUFFER) if body is not None else None
        self._add(Instr("http_request", site, args, buf=b))

    def http_wait_response(self) -> None:
        """Wait until every response of the earlier `http_request`s has ended as HTTP frames
        it: Content-Length, chunked, or the server closing the connection."""
        self._add(Instr("http_wait_response", user_site()))

    def close(self) -> None:
        """Close now (TCP: FIN; UDP: release the flow) and end the program."""
        self._add(Instr("close", user_site()))

    # ---- UDP -------------------------------------------------------------------------

    def send_msg(self, buf: BytesLike, size: int = 0, fill: Optional[BytesLike] = None) -> None:
        """Send one datagram."""
        site = user_site()
        b = make_buffer("buf", buf, size, fill, site, MAX_DATAGRAM)
        self._add(Instr("send_msg", site, buf=b))
        self.total_send_bytes += b.length

    def recv_msg(self, pkts: int, clear: bool = False) -> None:
        """Wait until `pkts` more datagrams have been received (cumulative)."""
        site = user_site()
        n = check_int("pkts", pkts, 0, U32_MAX, site)
        total = self.total_rcv_bytes + n
        if n < 1:
            raise ProfileError("recv_msg(0) waits for nothing (give the datagrams to wait for)",
                               site, "pkts")
        if total > U32_MAX:
            raise ProfileError(f"recv_msg watermark {total} is out of range 1..={U32_MAX}", site, "pkts")
        args: Dict[str, Any] = {"count": total}
        if clear:
            args["clear"] = True
        self._add(Instr("recv_msg", site, args))
        self.total_rcv_bytes = 0 if clear else total

    def set_keepalive_msg(self, msec: int, rx_mode: bool = False) -> None:
        """UDP flow aging: release the flow after `msec` without traffic."""
        site = user_site()
        m = check_int("msec", msec, 1, 3600000, site)
        args: Dict[str, Any] = {"msec": m}
        if rx_mode:
            args["rx_mode"] = True
        self._add(Instr("set_keepalive_msg", site, args))

    def close_msg(self) -> None:
        """Explicit UDP flow close (TRex name)."""
        self._add(Instr("close", user_site()))

    # ---- timing, variables, jumps ----------------------------------------------------

    def delay(self, usec: Union[int, float]) -> None:
        """Wait `usec` microseconds."""
        site = user_site()
        self._add(Instr("delay", site, {"usec": check_usec("usec", usec, site)}))

    def delay_rand(self, min_usec: Union[int, float], max_usec: Union[int, float]) -> None:
        """Wait a uniformly random time in [min_usec, max_usec]."""
        site = user_site()
        lo = check_usec("min_usec", min_usec, site)
        hi = check_usec("max_usec", max_usec, site)
        if lo > hi:
            raise ProfileError(f"delay_rand: min_usec {min_usec} is bigger than max_usec {max_usec}",
                               site, "min_usec")
        self._add(Instr("delay_rand", site, {"min_usec": lo, "max_usec": hi}))

    def set_var(self, var_id: str, val: int) -> None:
        """Set flow variable `var_id` (at most 4 per program) to `val`."""
        site = user_site()
        name = self._var(var_id, site, define=True)
        v = check_int("val", val, 0, U32_MAX, site)
        self._add(Instr("set_var", site, {"val": v}, var=name))

    def set_tick_var(self, var_id: str) -> None:
        """Store the current time in flow variable `var_id` (for `jmp_dp`)."""
        site = user_site()
        name = self._var(var_id, site, define=True)
        self._add(Instr("set_tick_var", site, var=name))

    def set_label(self, label: str) -> None:
        """Define a jump target: the next instruction."""
        site = user_site()
        if not isinstance(label, str) or not label:
            raise ProfileError(f"label must be a non-empty string, got {label!r}", site, "label")
        if label in self.labels:
            raise ProfileError(f"label {label!r} was defined already", site, "label")
        self.labels[label] = len(self.instrs)
        self._add(Instr("set_label", site, label=label))

    def jmp_nz(self, var_id: str, label: str) -> None:
        """Decrement `var_id`; jump to `label` while it is non-zero."""
        site = user_site()
        self._add(Instr("jmp_nz", site, var=self._var(var_id, site, define=False), label=label))

    def jmp_dp(self, var_id: str, label: str, duration: Union[int, float]) -> None:
        """Jump to `label` while less than `duration` seconds passed since `set_tick_var`."""
        site = user_site()
        if (isinstance(duration, bool) or not isinstance(duration, (int, float))
                or not math.isfinite(duration)):
            raise ProfileError(f"jmp_dp: duration must be a number of seconds, got {duration!r}",
                               site, "duration")
        usec = int(round(duration * 1e6))
        if not 1 <= usec <= 2**31 - 1:
            raise ProfileError(f"jmp_dp: duration {duration} s is out of range 1 us..2147 s",
                               site, "duration")
        self._add(Instr("jmp_dp", site, {"duration_usec": usec},
                        var=self._var(var_id, site, define=False), label=label))

    def update_keepalive(self, prog_s: "ASTFProgram") -> None:
        """Copy this program's leading `set_keepalive_msg` to the front of `prog_s` (TRex)."""
        if self.instrs and self.instrs[0].op == "set_keepalive_msg":
            if not (prog_s.instrs and prog_s.instrs[0].op == "set_keepalive_msg"):
                ins = self.instrs[0]
                prog_s.instrs.insert(0, Instr(ins.op, ins.site, dict(ins.args)))
                prog_s.labels = {k: v + 1 for k, v in prog_s.labels.items()}

    # ---- queries ---------------------------------------------------------------------

    def is_stream(self) -> bool:
        return self.stream

    @property
    def payload_len(self) -> int:
        """Bytes of L7 payload of the conversation this program came from (pcap programs)."""
        return self._payload_len

    def has_jumps(self) -> bool:
        return any(i.op in ("jmp_nz", "jmp_dp") for i in self.instrs)

    def has_http(self) -> bool:
        """Does the program use the HTTP instructions (byte totals then vary per request)?"""
        return any(i.op.startswith("http_") for i in self.instrs)

    def buffers(self) -> List[Buffer]:
        return [i.buf for i in self.instrs if i.buf is not None]

    def _until_close(self) -> List[Instr]:
        """The instructions that run: `close` ends the program (as the engine counts)."""
        for k, i in enumerate(self.instrs):
            if i.op == "close":
                return self.instrs[:k]
        return self.instrs

    def recv_need(self) -> Tuple[int, Optional[Site]]:
        """Bytes (TCP) or datagrams (UDP) this program waits for in total, and the site of the
        last wait (for programs without jumps)."""
        need, cur, site = 0, 0, None
        for i in self._until_close():
            if i.op in ("recv", "recv_msg"):
                cur = int(i.args["bytes" if i.op == "recv" else "count"])
                site = i.site
                if i.args.get("clear"):
                    need += cur
                    cur = 0
        return need + cur, site

    def send_total(self) -> int:
        """Bytes (TCP) or datagrams (UDP) this program sends (programs without jumps)."""
        run = self._until_close()
        if self.stream:
            return sum(i.buf.length for i in run if i.buf is not None)
        return sum(1 for i in run if i.op == "send_msg")

    # ---- IR --------------------------------------------------------------------------

    def _check_loops(self) -> None:
        """A loop must wait (a send, recv or non-zero delay in it; a counted loop of
        `send_msg` is a burst), and its last `recv` / `recv_msg` must clear the watermark:
        the engine's loader refuses both, here reported at the profile's own line."""
        def waits(i: Instr, counted: bool) -> bool:
            if i.op == "delay":
                return bool(i.args.get("usec"))
            if i.op == "delay_rand":
                return bool(i.args.get("max_usec"))
            return i.op in WAITING or (counted and i.op == "send_msg")

        for pc, ins in enumerate(self.instrs):
            if ins.op not in ("jmp_nz", "jmp_dp") or ins.label not in self.labels:
                continue
            target = self.labels[ins.label]
            if target > pc:
                continue
            body = self.instrs[target:pc + 1]
            if not any(waits(i, ins.op == "jmp_nz") for i in body):
                raise ProfileError(f"{ins.op}: the loop back to label {ins.label!r} never waits "
                                   f"(put a send, recv or delay in it)", ins.site, "label")
            for op in ("recv", "recv_msg"):
                last = next((i for i in reversed(body) if i.op == op), None)
                if last is not None and not last.args.get("clear"):
                    raise ProfileError(f"{op}: the last {op} of the loop back to label "
                                       f"{ins.label!r} needs clear=True (its cumulative "
                                       f"watermark is already met in the second round)",
                                       last.site, "clear")

    def to_ir(self, name: str, intern: Any) -> Dict[str, Any]:
        """The IR `program` object; `intern(Buffer) -> str` names buffers."""
        label_names: Dict[str, str] = {}
        for lab in self.labels:
            label_names[lab] = lab if _NAME_RE.fullmatch(lab) else f"label{len(label_names)}"
        cmds: List[Dict[str, Any]] = []
        for ins in self.instrs:
            c: Dict[str, Any] = {"op": ins.op}
            if ins.buf is not None:
                c["body" if ins.op == "http_request" else "buf"] = intern(ins.buf)
            if ins.var is not None:
                if ins.var not in self.vars:
                    raise ProfileError(f"{ins.op}: flow variable {ins.var!r} was never set "
                                       f"(set_var/set_tick_var)", ins.site, "var_id")
                c["id"] = self.vars[ins.var]
            if ins.label is not None:
                if ins.label not in self.labels:
                    raise ProfileError(f"{ins.op}: label {ins.label!r} is not defined in this program",
                                       ins.site, "label")
                c["label"] = label_names[ins.label]
            c.update(ins.args)
            cmds.append(c)
        self._check_loops()
        return {"name": name, "commands": cmds}

    # ---- from a capture --------------------------------------------------------------

    def _load_conversation(self, conv: Any, side: str, s_delay: Optional[ASTFCmd],
                           udp_mtu: Optional[int]) -> None:
        from .capture import Conversation

        assert isinstance(conv, Conversation)
        site = self.site
        self.server_port = conv.server_port
        self._payload_len = conv.payload_len
        delay_instr = s_delay.instr if (s_delay is not None and side == "s") else None
        if conv.transport == "tcp":
            self.stream = True
            if conv.turns and conv.turns[0].side == "s" and side == "s":
                self._add(Instr("accept", site))
            last_was_rx = False
            for t in conv.turns:
                if t.side == side:
                    if delay_instr is not None and last_was_rx:
                        self._add(Instr(delay_instr.op, site, dict(delay_instr.args)))
                    b = Buffer(t.data)
                    self._add(Instr("send", site, buf=b))
                    self.total_send_bytes += b.length
                    last_was_rx = False
                else:
                    self.total_rcv_bytes += len(t.data)
                    self._add(Instr("recv", site, {"bytes": self.total_rcv_bytes}))
                    last_was_rx = True
            if conv.reset_by == side:
                self._add(Instr("reset", site))
            elif conv.first_fin is not None and conv.first_fin != side:
                self._add(Instr("wait_for_peer_close", site))
            return
        # UDP: one send_msg per datagram; received datagrams counted before the next send
        self.stream = False
        body: List[Instr] = []
        pending_rx = 0
        last_side: Optional[str] = None
        last_time = 0.0
        max_payload = (udp_mtu - 42) if udp_mtu is not None else MAX_DATAGRAM
        for t in conv.turns:
            if t.side == side:
                if pending_rx:
                    self.total_rcv_bytes += pending_rx
                    body.append(Instr("recv_msg", site, {"count": self.total_rcv_bytes}))
                    pending_rx = 0
                    if delay_instr is not None:
                        body.append(Instr(delay_instr.op, site, dict(delay_instr.args)))
                elif last_side == side:
                    gap = int((t.time - last_time) * 1e6)
                    gap = min(gap, self.MAX_DELAY)
                    if gap > self.MIN_DELAY:
                        body.append(Instr("delay", site, {"usec": gap}))
                data = t.data[:max_payload]
                if not data:
                    raise ProfileError(f"capture holds an empty UDP datagram (#{t.index})", site, "file")
                body.append(Instr("send_msg", site, buf=Buffer(data)))
                self.total_send_bytes += len(data)
            else:
                pending_rx += 1
            last_side, last_time = t.side, t.time
        if pending_rx:
            self.total_rcv_bytes += pending_rx
            body.append(Instr("recv_msg", site, {"count": self.total_rcv_bytes}))
        if conv.max_gap_usec >= 900000:
            body.insert(0, Instr("set_keepalive_msg", site,
                                 {"msec": min(3600000, int(conv.max_gap_usec / 1000 * 1.5))}))
        for ins in body:
            self._add(ins)
