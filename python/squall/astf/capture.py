"""Captures to conversations: read a pcap/pcapng of ONE TCP or UDP conversation.

TCP: the client is the side that sent the SYN (else the one that answered SYN-ACK's
peer, else the first sender). Each direction is reassembled by sequence number: duplicate
(retransmitted) bytes are dropped, overlapping segments merged, out-of-order segments
held until the gap before them is filled. Data becomes *turns* in the order it became
contiguous at the capture point; consecutive data of one side forms one turn. A byte
range that is never captured is an error (the program would send invented bytes).

UDP: the client is the sender of the first datagram; every datagram is one turn.
"""

from __future__ import annotations

import os
import socket
from struct import error as StructError
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ProfileError, Site

_ctx_profile_dir: List[str] = []


def set_profile_dir(path: Optional[str]) -> None:
    """Set (or clear, with None) the folder relative capture paths are resolved against."""
    _ctx_profile_dir.clear()
    if path is not None:
        _ctx_profile_dir.append(path)


def resolve_path(file: object, site: Optional[Site]) -> str:
    """A capture path: absolute as is; relative to the profile's folder (set by the
    loader), else to the folder of the file that made the call, else to the cwd."""
    if not isinstance(file, str) or not file:
        raise ProfileError(f"file must be a path string, got {file!r}", site, "file")
    if os.path.isabs(file):
        return file
    if _ctx_profile_dir:
        base = _ctx_profile_dir[0]
    elif site is not None and os.path.isfile(site.filename):
        base = os.path.dirname(os.path.abspath(site.filename))
    else:
        base = os.getcwd()
    return os.path.normpath(os.path.join(base, file))


@dataclass
class Turn:
    side: str  # "c" or "s"
    data: bytes
    time: float
    index: int  # packet number (1-based) that completed / carried it


@dataclass
class Conversation:
    transport: str  # "tcp" | "udp"
    client: Tuple[str, int]
    server: Tuple[str, int]
    turns: List[Turn] = field(default_factory=list)
    first_fin: Optional[str] = None  # side that sent the first FIN
    reset_by: Optional[str] = None  # side that sent a RST (and no FIN before it)
    max_gap_usec: int = 0  # UDP: largest gap between consecutive datagrams
    stats: Dict[str, int] = field(default_factory=dict)

    @property
    def server_port(self) -> int:
        return self.server[1]

    @property
    def payload_len(self) -> int:
        return sum(len(t.data) for t in self.turns)

    def stream(self, side: str) -> bytes:
        return b"".join(t.data for t in self.turns if t.side == side)


@dataclass
class _Pkt:
    index: int
    time: float
    src: Tuple[str, int]
    dst: Tuple[str, int]
    proto: str
    seq: int = 0
    flags: int = 0
    payload: bytes = b""


FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10


def _read_packets(path: str, site: Optional[Site]) -> List[_Pkt]:
    import dpkt

    try:
        f = open(path, "rb")
    except OSError as e:
        raise ProfileError(f"cannot open capture {path}: {e.strerror}", site, "file") from None
    out: List[_Pkt] = []
    with f:
        magic = f.read(4)
        f.seek(0)
        try:
            reader: Any = dpkt.pcapng.Reader(f) if magic == b"\x0a\x0d\x0d\x0a" else dpkt.pcap.Reader(f)
        except (ValueError, dpkt.dpkt.Error) as e:
            raise ProfileError(f"{path} is not a pcap or pcapng capture ({e})", site, "file") from None
        dlt = reader.datalink()
        try:
            for n, (ts, raw) in enumerate(reader, start=1):
                p = _decode(n, float(ts), raw, dlt, path, site)
                if p is not None:
                    out.append(p)
        except (dpkt.dpkt.Error, ValueError, StructError, IndexError, KeyError, TypeError, OverflowError) as e:
            raise ProfileError(f"{path}: truncated or corrupt capture ({e})", site, "file") from None
    return out


def _decode(n: int, ts: float, raw: bytes, dlt: int, path: str, site: Optional[Site]) -> Optional[_Pkt]:
    import dpkt

    ip: Any
    if dlt == dpkt.pcap.DLT_EN10MB:
        ip = dpkt.ethernet.Ethernet(raw).data
    elif dlt == dpkt.pcap.DLT_LINUX_SLL:
        ip = dpkt.sll.SLL(raw).data
    elif dlt in (dpkt.pcap.DLT_RAW, 101, 228, 229):
        ip = dpkt.ip.IP(raw) if raw[:1] and raw[0] >> 4 == 4 else dpkt.ip6.IP6(raw)
    elif dlt in (dpkt.pcap.DLT_NULL, dpkt.pcap.DLT_LOOP):
        ip = dpkt.loopback.Loopback(raw).data
    else:
        raise ProfileError(f"{path}: unsupported link type {dlt}", site, "file")
    if isinstance(ip, dpkt.ip.IP):
        if ip.mf or ip.offset:
            raise ProfileError(f"{path}: packet {n} is an IP fragment; fragments are not supported",
                               site, "file")
        src_ip, dst_ip = socket.inet_ntop(socket.AF_INET, ip.src), socket.inet_ntop(socket.AF_INET, ip.dst)
    elif isinstance(ip, dpkt.ip6.IP6):
        src_ip, dst_ip = socket.inet_ntop(socket.AF_INET6, ip.src), socket.inet_ntop(socket.AF_INET6, ip.dst)
    else:
        return None  # ARP and other non-IP frames
    l4 = ip.data
    if isinstance(l4, dpkt.tcp.TCP):
        return _Pkt(n, ts, (src_ip, l4.sport), (dst_ip, l4.dport), "tcp", l4.seq, l4.flags, bytes(l4.data))
    if isinstance(l4, dpkt.udp.UDP):
        return _Pkt(n, ts, (src_ip, l4.sport), (dst_ip, l4.dport), "udp", payload=bytes(l4.data))
    return None


def load_conversation(path: str, site: Optional[Site]) -> Conversation:
    """Read `path` and return its single TCP or UDP conversation."""
    pkts = _read_packets(path, site)
    if not pkts:
        raise ProfileError(f"{path}: no TCP or UDP packets in the capture", site, "file")
    convs: Dict[Tuple[Any, ...], List[_Pkt]] = {}
    for p in pkts:
        a, b = sorted([p.src, p.dst])
        convs.setdefault((p.proto, a, b), []).append(p)
    if len(convs) > 1:
        names = "; ".join(f"{k[0]} {k[1][0]}:{k[1][1]} <-> {k[2][0]}:{k[2][1]}" for k in convs)
        raise ProfileError(f"{path}: holds {len(convs)} conversations, expected one ({names})",
                           site, "file")
    (proto, _, _), plist = next(iter(convs.items()))
    if proto == "udp":
        return _udp(plist)
    return _tcp(plist, path, site)


def _udp(pkts: List[_Pkt]) -> Conversation:
    client, server = pkts[0].src, pkts[0].dst
    conv = Conversation("udp", client, server)
    prev: Optional[float] = None
    for p in pkts:
        conv.turns.append(Turn("c" if p.src == client else "s", p.payload, p.time, p.index))
        if prev is not None:
            conv.max_gap_usec = max(conv.max_gap_usec, int((p.time - prev) * 1e6))
        prev = p.time
    return conv


class _Dir:
    """Reassembly state of one direction of a TCP connection."""

    def __init__(self) -> None:
        self.isn: Optional[int] = None  # sequence number of the first data byte
        self.next = 0  # offset of the next byte not yet contiguous
        self.pending: Dict[int, bytes] = {}  # offset -> bytes held beyond a gap
        self.fin_at: Optional[int] = None
        self.dup_bytes = 0
        self.ooo_segments = 0

    def offset(self, seq: int) -> int:
        assert self.isn is not None
        d = (seq - self.isn) & 0xFFFFFFFF
        return d - (1 << 32) if d >= (1 << 31) else d

    def add(self, seq: int, data: bytes) -> bytes:
        """Add a segment; returns the bytes that became contiguous."""
        if self.isn is None:
            self.isn = seq
        off = self.offset(seq)
        if self.fin_at is not None and off + len(data) > self.fin_at:
            data = data[: max(0, self.fin_at - off)]
        if off + len(data) <= self.next:
            self.dup_bytes += len(data)
            return b""
        if off < self.next:  # partial overlap with bytes we already have
            self.dup_bytes += self.next - off
            data = data[self.next - off:]
            off = self.next
        if off > self.next:
            self.ooo_segments += 1
            old = self.pending.get(off, b"")
            if len(data) > len(old):
                self.pending[off] = data
            return b""
        out = bytearray(data)
        self.next += len(data)
        while True:  # pull held segments that are now reachable
            progressed = False
            for o in sorted(self.pending):
                seg = self.pending[o]
                if o <= self.next:
                    del self.pending[o]
                    if o + len(seg) > self.next:
                        out += seg[self.next - o:]
                        self.dup_bytes += self.next - o
                        self.next = o + len(seg)
                    else:
                        self.dup_bytes += len(seg)
                    progressed = True
                    break
            if not progressed:
                return bytes(out)


def _tcp(pkts: List[_Pkt], path: str, site: Optional[Site]) -> Conversation:
    syn = next((p for p in pkts if p.flags & SYN and not p.flags & ACK), None)
    synack = next((p for p in pkts if p.flags & SYN and p.flags & ACK), None)
    if syn is not None:
        client, server = syn.src, syn.dst
    elif synack is not None:
        client, server = synack.dst, synack.src
    else:
        client, server = pkts[0].src, pkts[0].dst
    conv = Conversation("tcp", client, server)
    dirs = {"c": _Dir(), "s": _Dir()}
    for p in pkts:
        if p.flags & SYN:
            d = dirs["c" if p.src == client else "s"]
            d.isn = (p.seq + 1) & 0xFFFFFFFF
    if dirs["c"].isn is None or dirs["s"].isn is None:
        # no handshake in the capture: the lowest sequence number seen starts each stream
        for side in ("c", "s"):
            d = dirs[side]
            if d.isn is None:
                src = client if side == "c" else server
                first = next((p for p in pkts if p.src == src and p.payload), None)
                if first is not None:
                    d.isn = first.seq
                    for p in pkts:
                        if p.src == src and p.payload and d.offset(p.seq) < 0:
                            d.isn = p.seq
    for p in pkts:
        side = "c" if p.src == client else "s"
        d = dirs[side]
        if p.flags & RST and conv.reset_by is None and conv.first_fin is None:
            conv.reset_by = side
        if p.payload and d.isn is not None:
            if d.offset(p.seq) < 0 and d.offset(p.seq) + len(p.payload) <= 0:
                d.dup_bytes += len(p.payload)
            else:
                new = d.add(p.seq, p.payload)
                if new:
                    if conv.turns and conv.turns[-1].side == side:
                        conv.turns[-1].data += new
                        conv.turns[-1].index = p.index
                    else:
                        conv.turns.append(Turn(side, new, p.time, p.index))
        if p.flags & FIN:
            if conv.first_fin is None:
                conv.first_fin = side
            if d.isn is not None and d.fin_at is None:
                d.fin_at = d.offset(p.seq) + len(p.payload)
    for side, d in dirs.items():
        who = "client" if side == "c" else "server"
        if d.pending:
            o = min(d.pending)
            raise ProfileError(f"{path}: the {who}'s byte stream has a gap: bytes {d.next}..{o - 1} "
                               f"were never captured", site, "file")
        if d.fin_at is not None and d.next < d.fin_at:
            raise ProfileError(f"{path}: the {who}'s byte stream has a gap: bytes {d.next}..{d.fin_at - 1} "
                               f"were never captured", site, "file")
        conv.stats[f"{side}_dup_bytes"] = d.dup_bytes
        conv.stats[f"{side}_ooo_segments"] = d.ooo_segments
    if not conv.turns:
        raise ProfileError(f"{path}: the TCP conversation carries no payload", site, "file")
    return conv
