"""Templates and server association (TRex names): `ASTFAssociationRule`, `ASTFAssociation`,
`ASTFTCPClientTemplate`, `ASTFTCPServerTemplate`, `ASTFTemplate`, `ASTFCapInfo`."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Union

from ..errors import ProfileError, Site, user_site
from .glob_info import ASTFGlobalInfoPerTemplate
from .ipgen import ASTFIPGen, parse_ipv4
from .program import ASTFCmd, ASTFCmdDelay, ASTFCmdDelayRnd, ASTFProgram, check_int

_NAME_RE = re.compile(r"^[A-Za-z0-9_.:/-]{1,64}$")


def _check_type(cls: str, what: str, val: object, t: Any, site: Optional[Site], must: bool = True) -> None:
    if val is None:
        if must:
            raise ProfileError(f"{cls}: {what} is required", site, what)
        return
    if not isinstance(val, t):
        names = " or ".join(x.__name__ for x in (t if isinstance(t, tuple) else (t,)))
        raise ProfileError(f"{cls}: {what} must be {names}, got {type(val).__name__}", site, what)


def check_tg_name(cls: str, tg_name: Optional[str], site: Optional[Site]) -> None:
    if tg_name is None:
        return
    if not isinstance(tg_name, str) or not _NAME_RE.fullmatch(tg_name):
        raise ProfileError(f"{cls}: tg_name {tg_name!r} must be 1-64 characters from "
                           "A-Z a-z 0-9 _ . : / -", site, "tg_name")


class ASTFCluster:
    """Accepted for TRex compatibility; has no effect (TRex: "for future use")."""


_L7_MAX_OFFSETS = 8


def _l7_bytes(what: str, val: object, n: Optional[int], site: Optional[Site]) -> List[int]:
    if not isinstance(val, (list, tuple)) or not val or len(val) > _L7_MAX_OFFSETS:
        raise ProfileError(f"ASTFAssociationRule: l7_map {what} must be a list of 1..{_L7_MAX_OFFSETS} "
                           f"integers, got {val!r}", site, "l7_map")
    if n is not None and len(val) != n:
        raise ProfileError(f"ASTFAssociationRule: l7_map {what} has {len(val)} entries, give one per offset "
                           f"({n})", site, "l7_map")
    out = []
    for x in val:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= 255:
            raise ProfileError(f"ASTFAssociationRule: l7_map {what} entries must be integers 0..255, "
                               f"got {x!r}", site, "l7_map")
        out.append(x)
    return out


def _l7_map(l7_map: Any, site: Optional[Site]) -> Dict[str, List[int]]:
    """TRex's `l7_map`: a list of offsets, or `{"offset": [...], "mask": [...], "value": [...]}`."""
    if isinstance(l7_map, (list, tuple)):
        l7_map = {"offset": list(l7_map)}
    if not isinstance(l7_map, dict):
        raise ProfileError(f"ASTFAssociationRule: l7_map must be a list of offsets or a dict, got "
                           f"{type(l7_map).__name__}", site, "l7_map")
    unknown = sorted(set(l7_map) - {"offset", "mask", "value"})
    if unknown or "offset" not in l7_map:
        raise ProfileError("ASTFAssociationRule: l7_map takes offset (required), mask and value"
                           + (f"; unknown: {', '.join(map(str, unknown))}" if unknown else ""), site, "l7_map")
    offset = _l7_bytes("offset", l7_map["offset"], None, site)
    if len(set(offset)) != len(offset):
        raise ProfileError(f"ASTFAssociationRule: l7_map offsets must be distinct, got {offset}", site, "l7_map")
    out = {"offset": offset}
    for k in ("mask", "value"):
        if k in l7_map:
            out[k] = _l7_bytes(k, l7_map[k], len(offset), site)
    return out


class ASTFAssociationRule:
    """Server association by destination port and, optionally, destination address range
    and the client's first bytes (`l7_map`: offsets, or `{"offset", "mask", "value"}`).
    """

    def __init__(self, port: int = 80, ip_start: Optional[str] = None, ip_end: Optional[str] = None,
                 l7_map: Any = None) -> None:
        self.site = user_site()
        self.port = check_int("port", port, 1, 65535, self.site)
        if (ip_start is None) != (ip_end is None):
            raise ProfileError("ASTFAssociationRule: give both ip_start and ip_end, or neither",
                               self.site, "ip_start" if ip_start is None else "ip_end")
        if ip_start is not None and ip_end is not None:
            if parse_ipv4("ip_start", ip_start, self.site) > parse_ipv4("ip_end", ip_end, self.site):
                raise ProfileError(f"ASTFAssociationRule: ip_start {ip_start} > ip_end {ip_end}",
                                   self.site, "ip_start")
        self.l7_map = _l7_map(l7_map, self.site) if l7_map is not None else None
        self.ip_start = ip_start
        self.ip_end = ip_end

    def to_json(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"port": self.port}
        if self.ip_start is not None:
            d["ip_start"] = self.ip_start
            d["ip_end"] = self.ip_end
        if self.l7_map is not None:
            d["l7_map"] = self.l7_map
        return d


class ASTFAssociation:
    """One rule or a list of rules."""

    def __init__(self, rules: Union[ASTFAssociationRule, Sequence[ASTFAssociationRule], None] = None) -> None:
        self.site = user_site()
        if rules is None:
            rules = ASTFAssociationRule()
        lst = [rules] if isinstance(rules, ASTFAssociationRule) else list(rules)
        if not lst:
            raise ProfileError("ASTFAssociation: needs at least one rule", self.site, "rules")
        for r in lst:
            _check_type("ASTFAssociation", "rules", r, ASTFAssociationRule, self.site)
        self.rules: List[ASTFAssociationRule] = lst

    @property
    def port(self) -> int:
        return self.rules[0].port

    def is_port_only(self) -> bool:
        return len(self.rules) == 1 and self.rules[0].ip_start is None and self.rules[0].l7_map is None

    def to_json(self) -> List[Dict[str, Any]]:
        return [r.to_json() for r in self.rules]


class _TemplateBase:
    def __init__(self, program: Optional[ASTFProgram], cls: str) -> None:
        self.site = user_site()
        _check_type(cls, "program", program, ASTFProgram, self.site)
        assert program is not None
        self.program: ASTFProgram = program

    def is_stream(self) -> bool:
        return self.program.stream


class ASTFTCPClientTemplate(_TemplateBase):
    """Client side of a template: program, address pools, destination port, rate."""

    def __init__(self, ip_gen: ASTFIPGen, cluster: Optional[ASTFCluster] = None,
                 program: Optional[ASTFProgram] = None, port: int = 80, cps: float = 1,
                 glob_info: Optional[ASTFGlobalInfoPerTemplate] = None, limit: Optional[int] = None,
                 cont: Optional[bool] = None) -> None:
        super().__init__(program, "ASTFTCPClientTemplate")
        cls = "ASTFTCPClientTemplate"
        _check_type(cls, "ip_gen", ip_gen, ASTFIPGen, self.site)
        _check_type(cls, "cluster", cluster, ASTFCluster, self.site, must=False)
        _check_type(cls, "glob_info", glob_info, ASTFGlobalInfoPerTemplate, self.site, must=False)
        self.port = check_int("port", port, 1, 65535, self.site)
        if isinstance(cps, bool) or not isinstance(cps, (int, float)) or not 0 < cps <= 1e8:
            raise ProfileError(f"{cls}: cps must be a number in (0, 1e8], got {cps!r}", self.site, "cps")
        self.cps = cps
        self.limit = check_int("limit", limit, 0, 2**32 - 1, self.site) if limit is not None else None
        if cont:
            raise ProfileError(f"{cls}: cont=True (keep `limit` flows alive) is not supported by "
                               "Squall's profile IR v1", self.site, "cont")
        self.ip_gen = ip_gen
        self.glob_info = glob_info


class ASTFTCPServerTemplate(_TemplateBase):
    """Server side of a template: program and association (default: port 80)."""

    def __init__(self, program: Optional[ASTFProgram] = None,
                 assoc: Union[ASTFAssociation, ASTFAssociationRule, None] = None,
                 glob_info: Optional[ASTFGlobalInfoPerTemplate] = None) -> None:
        super().__init__(program, "ASTFTCPServerTemplate")
        cls = "ASTFTCPServerTemplate"
        _check_type(cls, "assoc", assoc, (ASTFAssociation, ASTFAssociationRule), self.site, must=False)
        _check_type(cls, "glob_info", glob_info, ASTFGlobalInfoPerTemplate, self.site, must=False)
        if assoc is None:
            assoc = ASTFAssociation(ASTFAssociationRule())
        elif isinstance(assoc, ASTFAssociationRule):
            assoc = ASTFAssociation(assoc)
        self.assoc: ASTFAssociation = assoc
        self.glob_info = glob_info


class ASTFTemplate:
    """A client template and a server template, optionally in a template group (`tg_name`)."""

    def __init__(self, client_template: Optional[ASTFTCPClientTemplate] = None,
                 server_template: Optional[ASTFTCPServerTemplate] = None,
                 tg_name: Optional[str] = None) -> None:
        self.site = user_site()
        cls = "ASTFTemplate"
        _check_type(cls, "client_template", client_template, ASTFTCPClientTemplate, self.site)
        _check_type(cls, "server_template", server_template, ASTFTCPServerTemplate, self.site)
        assert client_template is not None and server_template is not None
        if client_template.is_stream() != server_template.is_stream():
            raise ProfileError(f"{cls}: the client program is "
                               f"{'TCP' if client_template.is_stream() else 'UDP'} but the server program is "
                               f"{'TCP' if server_template.is_stream() else 'UDP'}", self.site,
                               "server_template")
        check_tg_name(cls, tg_name, self.site)
        self.client_template = client_template
        self.server_template = server_template
        self.tg_name = tg_name
        self.name: Optional[str] = None


class ASTFCapInfo:
    """A template taken from a capture of one conversation.

    `ASTFCapInfo(file="pcaps/http_get.pcap", cps=10)`; the path is relative to the profile's
    folder. The destination port comes from the capture unless `port` or `assoc` is given.
    """

    def __init__(self, file: Optional[str] = None, cps: Optional[float] = None,
                 assoc: Union[ASTFAssociation, ASTFAssociationRule, None] = None,
                 ip_gen: Optional[ASTFIPGen] = None, port: Optional[int] = None,
                 l7_percent: Optional[float] = None,
                 s_glob_info: Optional[ASTFGlobalInfoPerTemplate] = None,
                 c_glob_info: Optional[ASTFGlobalInfoPerTemplate] = None,
                 limit: Optional[int] = None, cont: Optional[bool] = None, tg_name: Optional[str] = None,
                 s_delay: Optional[ASTFCmd] = None, udp_mtu: Optional[int] = None) -> None:
        self.site = user_site()
        cls = "ASTFCapInfo"
        if file is None:
            raise ProfileError(f"{cls}: file is required", self.site, "file")
        _check_type(cls, "assoc", assoc, (ASTFAssociation, ASTFAssociationRule), self.site, must=False)
        _check_type(cls, "ip_gen", ip_gen, ASTFIPGen, self.site, must=False)
        _check_type(cls, "c_glob_info", c_glob_info, ASTFGlobalInfoPerTemplate, self.site, must=False)
        _check_type(cls, "s_glob_info", s_glob_info, ASTFGlobalInfoPerTemplate, self.site, must=False)
        _check_type(cls, "s_delay", s_delay, (ASTFCmdDelay, ASTFCmdDelayRnd), self.site, must=False)
        if cps is not None and l7_percent is not None:
            raise ProfileError(f'When creating "{cls}", must not specify both "cps" and "l7_percent"',
                               self.site, "l7_percent")
        if assoc is not None and port is not None:
            raise ProfileError(f'When creating "{cls}", must not specify both "port" and "assoc"',
                               self.site, "port")
        if l7_percent is not None and (isinstance(l7_percent, bool) or not isinstance(l7_percent, (int, float))
                                       or not 0 < l7_percent <= 100):
            raise ProfileError(f"{cls}: l7_percent must be in (0, 100], got {l7_percent!r}", self.site,
                               "l7_percent")
        if cont:
            raise ProfileError(f"{cls}: cont=True is not supported by Squall's profile IR v1", self.site, "cont")
        check_tg_name(cls, tg_name, self.site)
        if port is not None:
            check_int("port", port, 1, 65535, self.site)
        if limit is not None:
            check_int("limit", limit, 0, 2**32 - 1, self.site)
        from .capture import resolve_path

        self.file = file
        self.path = resolve_path(file, self.site)
        self.cps = cps if cps is not None or l7_percent is not None else 1
        self.l7_percent = l7_percent
        if isinstance(assoc, ASTFAssociationRule):
            assoc = ASTFAssociation(assoc)
        self.assoc = assoc
        self.port = port
        self.ip_gen = ip_gen
        self.c_glob_info = c_glob_info
        self.s_glob_info = s_glob_info
        self.limit = limit
        self.tg_name = tg_name
        self.s_delay = s_delay
        self.udp_mtu = udp_mtu
