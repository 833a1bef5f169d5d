"""TRex-style tunables: `ASTFGlobalInfo` and `ASTFGlobalInfoPerTemplate`.

Attribute-style access (`info.tcp.mss = 1460`) as in TRex, but every assignment is
checked at once: an unknown name, a wrong type or an out-of-range value raises a
`ProfileError` naming the field (e.g. `tcp.mss`) and the Python line of the assignment.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ..errors import ProfileError, Site, user_site

Value = Union[int, bool, str]


@dataclass(frozen=True)
class _Spec:
    kind: str  # "int" | "flag" | "enum" | "flag_or_int" (a bool, or an int in lo..=hi) | "ipv6"
    lo: int = 0
    hi: int = 0
    choices: Tuple[str, ...] = ()
    doc: str = ""


_TCP: Dict[str, _Spec] = {
    "mss": _Spec("int", 64, 9216, doc="maximum segment size"),
    "initwnd": _Spec("int", 1, 20, doc="initial congestion window, segments"),
    "delay_ack_msec": _Spec("int", 0, 500, doc="delayed-ACK timeout"),
    "burst_ack": _Spec("flag", doc="one ACK for the in-order segments of a receive burst, as Linux "
                       "ACKs a GRO super-packet (Squall; default on)"),
    "no_delay": _Spec("flag_or_int", 0, 3, doc="disable Nagle (bit 0); bit 1: TRex's PUSH on every "
                      "segment, accepted and not applied"),
    "no_delay_counter": _Spec("int", 0, 65535, doc="received bytes after which an ACK goes at "
                              "once (0: every second full-sized segment)"),
    "rxbufsize": _Spec("int", 1024, 1073725440, doc="receive buffer"),
    "txbufsize": _Spec("int", 1024, 1073725440, doc="send buffer"),
    "rexmtthresh": _Spec("int", 1, 10, doc="duplicate ACKs before fast retransmit"),
    "do_rfc1323": _Spec("flag", doc="window scaling and timestamps"),
    "do_sack": _Spec("flag", doc="selective acknowledgements (default on, as TRex)"),
    "keepinit": _Spec("int", 1, 65533, doc="connection-establishment timeout, seconds (side-wide)"),
    "keepidle": _Spec("int", 0, 65533, doc="keepalive idle time, seconds; 0 = off (side-wide)"),
    "keepintvl": _Spec("int", 1, 65533, doc="keepalive probe interval, seconds (side-wide)"),
    "blackhole": _Spec("int", 0, 0, doc="only 0: a RST answers a segment for no flow (side-wide)"),
    "cc_algo": _Spec("int", 0, 0, doc="only 0: NewReno (TRex's 1, Cubic, is not implemented; side-wide)"),
    "do_ecn": _Spec("int", 0, 0, doc="only 0: no ECN (side-wide)"),
}
_IP: Dict[str, _Spec] = {
    "ttl": _Spec("int", 1, 255),
    "tos": _Spec("int", 0, 255),
    "dont_use_inbound_mac": _Spec("flag", doc="accepted, no effect: Squall always sends to its next hop"),
}
_IPV6: Dict[str, _Spec] = {
    "enable": _Spec("int", 0, 1, doc="1: the client side's flows go over IPv6 (pool values as the low 32 bits)"),
    "src_msb": _Spec("ipv6", doc="high 96 bits of client addresses (default ::)"),
    "dst_msb": _Spec("ipv6", doc="high 96 bits of server addresses (default ::)"),
}
_SCHED: Dict[str, _Spec] = {
    "rampup_sec": _Spec("int", 0, 60000, doc="linear ramp-up"),
    "spacing": _Spec("enum", choices=("even", "poisson"), doc="flow start spacing (Squall)"),
    "seed": _Spec("int", 0, 2**64 - 1, doc="seed of pseudo-random choices (Squall)"),
    "accurate": _Spec("flag", doc="accepted, no effect: Squall's scheduler is always exact"),
}
_PER_TEMPLATE_TCP = ("mss", "initwnd", "no_delay", "no_delay_counter", "rxbufsize", "txbufsize",
                     "delay_ack_msec", "burst_ack", "rexmtthresh", "do_rfc1323", "do_sack")

# Tunables TRex accepts (or that TRex users try) that Squall refuses, with the reason.
_REFUSED: Dict[str, Dict[str, str]] = {}


def check_value(field: str, spec: _Spec, val: object, site: Optional[Site]) -> Value:
    """Validate one tunable value; returns it normalised (flags stay bool or 0/1)."""
    if spec.kind == "flag":
        if isinstance(val, bool) or (isinstance(val, int) and val in (0, 1)):
            return val
        raise ProfileError(f"{field} must be a bool or 0/1, got {val!r}", site, field)
    if spec.kind == "flag_or_int" and isinstance(val, bool):
        return val
    if spec.kind == "ipv6":
        try:
            ipaddress.IPv6Address(val if isinstance(val, str) else "")
        except ValueError:
            raise ProfileError(f"{field} must be an IPv6 address string such as \"2001:db8::\" (its high "
                               f"96 bits are used), got {val!r}", site, field) from None
        assert isinstance(val, str)
        return val
    if spec.kind == "enum":
        if isinstance(val, str) and val in spec.choices:
            return val
        raise ProfileError(f"{field} must be one of {list(spec.choices)}, got {val!r}", site, field)
    if isinstance(val, bool) or not isinstance(val, int):
        raise ProfileError(f"{field} must be an integer, got {type(val).__name__} {val!r}", site, field)
    if not spec.lo <= val <= spec.hi:
        why = f" ({spec.doc})" if spec.lo == spec.hi and spec.doc else ""
        raise ProfileError(f"{field} = {val} is out of range {spec.lo}..={spec.hi}{why}", site, field)
    return val


class _Section:
    """One group of tunables (`tcp`, `ip`, `scheduler`) with checked attributes."""

    def __init__(self, owner: str, name: str, specs: Mapping[str, _Spec]) -> None:
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_specs", dict(specs))
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_sites", {})

    def _unknown(self, attr: str) -> ProfileError:
        field = f"{self._name}.{attr}"
        if self._name == "tcp" and attr in _TCP:
            return ProfileError(f"{self._owner}: tunable {field} is side-wide: set it in ASTFGlobalInfo "
                                "(TRex's ASTFGlobalInfoPerTemplate has no such field either)",
                                user_site(), field)
        reason = _REFUSED.get(self._name, {}).get(attr)
        if reason is not None:
            return ProfileError(f"{self._owner}: tunable {field} is not supported: {reason}",
                                user_site(), field)
        known = ", ".join(sorted(self._specs))
        return ProfileError(f"{self._owner}: unknown tunable {field} (known in {self._name}: {known})",
                            user_site(), field)

    def __setattr__(self, attr: str, val: object) -> None:
        spec = self._specs.get(attr)
        if spec is None:
            raise self._unknown(attr)
        site = user_site()
        field = f"{self._name}.{attr}"
        self._values[attr] = check_value(field, spec, val, site)
        self._sites[attr] = site

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        if attr not in self._specs:
            raise self._unknown(attr)
        return self._values.get(attr)

    def __dir__(self) -> list[str]:
        return sorted(self._specs)

    def to_dict(self) -> Dict[str, Value]:
        return dict(self._values)


class ASTFGlobalInfoBase:
    """Common part of the two tunables classes: sections reached as attributes."""

    _sections: Dict[str, Mapping[str, _Spec]] = {}
    _label = "GlobalInfo"

    def __init__(self) -> None:
        object.__setattr__(self, "_site", user_site())
        object.__setattr__(self, "_secs", {n: _Section(self._label, n, s) for n, s in self._sections.items()})

    def __getattr__(self, attr: str) -> _Section:
        if attr.startswith("_"):
            raise AttributeError(attr)
        secs: Dict[str, _Section] = object.__getattribute__(self, "_secs")
        if attr in secs:
            return secs[attr]
        raise ProfileError(f"{self._label}: unknown tunable group {attr!r} (known: {', '.join(secs)})",
                           user_site(), attr)

    def __setattr__(self, attr: str, val: object) -> None:
        if attr in self._sections:
            raise ProfileError(f"{self._label}: {attr} must be followed by a field name, e.g. "
                               f"{attr}.{next(iter(self._sections[attr]))}", user_site(), attr)
        raise ProfileError(f"{self._label}: unknown tunable group {attr!r}", user_site(), attr)

    @property
    def site(self) -> Optional[Site]:
        s: Optional[Site] = object.__getattribute__(self, "_site")
        return s

    def section(self, name: str) -> Dict[str, Value]:
        """The values set in one section (`tcp`, `ip`, `scheduler`), possibly empty."""
        secs: Dict[str, _Section] = object.__getattribute__(self, "_secs")
        sec = secs.get(name)
        return sec.to_dict() if sec is not None else {}

    def to_json(self) -> Dict[str, Dict[str, Value]]:
        """The non-empty sections, e.g. `{"tcp": {"mss": 1460}}`."""
        secs: Dict[str, _Section] = object.__getattribute__(self, "_secs")
        return {n: s.to_dict() for n, s in secs.items() if s.to_dict()}


class ASTFGlobalInfo(ASTFGlobalInfoBase):
    """Profile-wide tunables (TRex `ASTFGlobalInfo`): `tcp.*`, `ip.*`, `scheduler.*`, `ipv6.*`.

    Pass it as `ASTFProfile(default_c_glob_info=..., default_s_glob_info=...)`.
    """

    _sections = {"tcp": _TCP, "ip": _IP, "scheduler": _SCHED, "ipv6": _IPV6}
    _label = "GlobalInfo"


class ASTFGlobalInfoPerTemplate(ASTFGlobalInfoBase):
    """Per-template tunables (TRex `ASTFGlobalInfoPerTemplate`): `tcp.*`, `ip.*`, `ipv6.*`."""

    _sections = {"tcp": {k: _TCP[k] for k in _PER_TEMPLATE_TCP}, "ip": _IP, "ipv6": _IPV6}
    _label = "GlobalInfoPerTemplate"
