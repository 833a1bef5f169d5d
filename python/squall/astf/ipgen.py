"""Client/server address pools: `ASTFIPGenDist`, `ASTFIPGenGlobal`, `ASTFIPGen` (TRex names).

A pool is IPv4 (`["16.0.0.1", "16.0.0.200"]`) or native IPv6 (`["2001:db8::1", "2001:db8::ff"]`:
first and last share their high 96 bits, the low 32 bits vary, as TRex's 32-bit generator).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Dict, Optional, Sequence, Tuple

from ..errors import ProfileError, Site, user_site

MAX_POOL = 1 << 24


def _unusable(msb: Optional[int], first: int, last: int) -> Optional[str]:
    """What a pool `first..last` (IPv4, or the low 32 bits under IPv6 high bits `msb`)
    holds that no host may use as its address, if anything (the loader's rule)."""
    def hits(lo: int, hi: int) -> bool:
        return first <= hi and lo <= last
    if msb is None:
        if hits(0, 0x00FF_FFFF):
            return "0.0.0.0/8 (this network)"
        if hits(0x7F00_0000, 0x7FFF_FFFF):
            return "127.0.0.0/8 (loopback)"
        if last >= 0xE000_0000:
            return "224.0.0.0 or above (multicast, reserved, broadcast)"
    elif msb == 0 and first <= 1:
        return ":: or ::1 (unspecified, loopback)"
    return None


def parse_ipv4(what: str, val: object, site: Optional[Site]) -> int:
    """An IPv4 address string as an integer, or a ProfileError naming `what`."""
    if not isinstance(val, str):
        raise ProfileError(f"{what} must be an IPv4 address string, got {val!r}", site, what)
    try:
        return int(ipaddress.IPv4Address(val))
    except ValueError:
        raise ProfileError(f"{what}: {val!r} is not an IPv4 address", site, what) from None


def parse_bound(what: str, val: object, site: Optional[Site]) -> Tuple[Optional[int], int]:
    """A pool bound: (None, IPv4 value) or (high 96 bits, low 32 bits) of an IPv6 address."""
    if not isinstance(val, str):
        raise ProfileError(f"{what} must be an IPv4 or IPv6 address string, got {val!r}", site, what)
    try:
        return None, int(ipaddress.IPv4Address(val))
    except ValueError:
        pass
    try:
        a = int(ipaddress.IPv6Address(val))
    except ValueError:
        raise ProfileError(f"{what}: {val!r} is not an IPv4 or IPv6 address", site, what) from None
    return a >> 32, a & 0xFFFFFFFF


class ASTFIPGenDist:
    """A range of addresses with a distribution.

    `ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.200"], distribution="seq")`, or IPv6:
    `ASTFIPGenDist(ip_range=["2001:db8::1", "2001:db8::ff"])`.
    """

    def __init__(self, ip_range: Sequence[str], distribution: str = "seq",
                 per_core_distribution: Optional[str] = None) -> None:
        self.site = user_site()
        if not isinstance(ip_range, (list, tuple)) or len(ip_range) != 2:
            raise ProfileError(f"ASTFIPGenDist: ip_range must be [first, last], got {ip_range!r}",
                               self.site, "ip_range")
        msb, first = parse_bound("ip_range[0]", ip_range[0], self.site)
        msb_last, last = parse_bound("ip_range[1]", ip_range[1], self.site)
        if (msb is None) != (msb_last is None):
            raise ProfileError(f"ASTFIPGenDist: ip_range {ip_range[0]}..{ip_range[1]} mixes IPv4 and IPv6: "
                               "a pool has one family", self.site, "ip_range")
        if msb != msb_last:
            raise ProfileError(f"ASTFIPGenDist: ip_range {ip_range[0]}..{ip_range[1]}: an IPv6 pool varies only "
                               "the low 32 bits (TRex's 32-bit generator); first and last must share their "
                               "first 96 bits", self.site, "ip_range")
        if first > last:
            raise ProfileError(f"ASTFIPGenDist: empty pool: ip_range {ip_range[0]} > {ip_range[1]}",
                               self.site, "ip_range")
        bad = _unusable(msb, first, last)
        if bad is not None:
            raise ProfileError(f"ASTFIPGenDist: ip_range {ip_range[0]}..{ip_range[1]} holds {bad}: not a "
                               "host's address (RFC 1122 §3.2.1.3, RFC 4291)", self.site, "ip_range")
        if last - first + 1 > MAX_POOL:
            raise ProfileError(f"ASTFIPGenDist: ip_range holds {last - first + 1} addresses, "
                               f"at most {MAX_POOL} are allowed", self.site, "ip_range")
        if distribution not in ("seq", "rand"):
            raise ProfileError(f"ASTFIPGenDist: distribution must be 'seq' or 'rand', got {distribution!r}",
                               self.site, "distribution")
        if per_core_distribution is not None and per_core_distribution not in ("default", "seq"):
            raise ProfileError("ASTFIPGenDist: per_core_distribution must be 'default' or 'seq', "
                               f"got {per_core_distribution!r}", self.site, "per_core_distribution")
        self.ip_start = str(ip_range[0])
        self.ip_end = str(ip_range[1])
        self.first = first
        self.last = last
        self.msb = msb
        self.distribution = distribution
        self.per_core_distribution = per_core_distribution
        self.direction: Optional[str] = None

    @property
    def is_ipv6(self) -> bool:
        return self.msb is not None

    def overlaps(self, other: "ASTFIPGenDist") -> bool:
        return self.msb == other.msb and self.first <= other.last and other.first <= self.last

    def key(self) -> tuple[Optional[int], int, int, str, Optional[str]]:
        return (self.msb, self.first, self.last, self.distribution, self.per_core_distribution)

    def to_json(self) -> Dict[str, Any]:
        """The IR `dist` object."""
        d: Dict[str, Any] = {"range": [self.ip_start, self.ip_end], "distribution": self.distribution}
        if self.per_core_distribution is not None:
            d["per_core_distribution"] = self.per_core_distribution
        return d


class ASTFIPGenGlobal:
    """Global properties of a generator: the per-port-pair address offset."""

    def __init__(self, ip_offset: str = "1.0.0.0", ip_offset_server: Optional[str] = None) -> None:
        self.site = user_site()
        parse_ipv4("ip_offset", ip_offset, self.site)
        if ip_offset_server is not None:
            parse_ipv4("ip_offset_server", ip_offset_server, self.site)
        self.ip_offset = ip_offset
        self.ip_offset_server = ip_offset_server


class ASTFIPGen:
    """A client pool and a server pool.

    `ASTFIPGen(dist_client=c, dist_server=s, glob=ASTFIPGenGlobal(ip_offset="1.0.0.0"))`
    """

    def __init__(self, dist_client: ASTFIPGenDist, dist_server: ASTFIPGenDist,
                 glob: Optional[ASTFIPGenGlobal] = None) -> None:
        self.site = user_site()
        for name, val in (("dist_client", dist_client), ("dist_server", dist_server)):
            if not isinstance(val, ASTFIPGenDist):
                raise ProfileError(f"ASTFIPGen: {name} must be an ASTFIPGenDist, got {type(val).__name__}",
                                   self.site, name)
        if glob is None:
            glob = ASTFIPGenGlobal.__new__(ASTFIPGenGlobal)
            glob.site, glob.ip_offset, glob.ip_offset_server = self.site, "1.0.0.0", None
        elif not isinstance(glob, ASTFIPGenGlobal):
            raise ProfileError(f"ASTFIPGen: glob must be an ASTFIPGenGlobal, got {type(glob).__name__}",
                               self.site, "glob")
        if dist_client.is_ipv6 != dist_server.is_ipv6:
            raise ProfileError("ASTFIPGen: the client pool and the server pool are of different families: a "
                               "flow is IPv4 or IPv6 end to end", self.site, "dist_server")
        if dist_client.direction == "s":
            raise ProfileError("ASTFIPGen: this ASTFIPGenDist is already used as a server pool",
                               self.site, "dist_client")
        if dist_server.direction == "c":
            raise ProfileError("ASTFIPGen: this ASTFIPGenDist is already used as a client pool",
                               self.site, "dist_server")
        dist_client.direction = "c"
        dist_server.direction = "s"
        self.dist_client = dist_client
        self.dist_server = dist_server
        self.glob = glob

    def key(self) -> tuple[Any, ...]:
        return (self.dist_client.key(), self.dist_server.key(), self.glob.ip_offset, self.glob.ip_offset_server)

    def to_json(self, name: str) -> Dict[str, Any]:
        """The IR `ip_gen` object under `name`."""
        d: Dict[str, Any] = {
            "name": name,
            "clients": self.dist_client.to_json(),
            "servers": self.dist_server.to_json(),
            "ip_offset": self.glob.ip_offset,
        }
        if self.glob.ip_offset_server is not None:
            d["ip_offset_server"] = self.glob.ip_offset_server
        return d


