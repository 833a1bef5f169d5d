"""Builds synthetic captures for the conversion tests (run as a script to refresh the
shipped `examples/pcaps/tcp_ooo_retrans.pcap`).

The TCP capture holds one HTTP-like exchange whose segments arrive out of order, are
retransmitted whole and in part (overlapping), and whose server sequence numbers wrap
around 2^32. Timestamps are fixed, so the file is byte-for-byte reproducible.
"""

from __future__ import annotations

import socket
import sys
from typing import List, Tuple

import dpkt

CLIENT = ("198.18.7.2", 40001)
SERVER = ("198.18.7.1", 8080)
REQUEST = b"GET /ooo HTTP/1.1\r\nHost: 198.18.7.1\r\nUser-Agent: capgen\r\n\r\n"
BODY = bytes((i * 7 + 3) % 251 for i in range(3000))
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n" + BODY
C_ISN = 1000
S_ISN = 0xFFFFFF00  # wraps inside the response

SYN, ACK, FIN, PSH = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_FIN, dpkt.tcp.TH_PUSH


def _frame(src: Tuple[str, int], dst: Tuple[str, int], seq: int, ack: int, flags: int,
           data: bytes = b"") -> bytes:
    tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF,
                       flags=flags, win=65535, data=data)
    ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=dpkt.ip.IP_PROTO_TCP,
                    ttl=64, data=tcp)
    ip.len = len(ip)
    eth = dpkt.ethernet.Ethernet(src=b"\x02\x00\x00\x00\x00\x02", dst=b"\x02\x00\x00\x00\x00\x01",
                                 type=dpkt.ethernet.ETH_TYPE_IP, data=ip)
    return bytes(eth)


def tcp_frames() -> List[bytes]:
    c, s = CLIENT, SERVER
    cs = C_ISN + 1
    ss = S_ISN + 1
    req1, req2 = REQUEST[:20], REQUEST[20:]
    r = RESPONSE

    def seg(a: int, b: int) -> bytes:
        return r[a:b]

    f: List[bytes] = [
        _frame(c, s, C_ISN, 0, SYN),
        _frame(s, c, S_ISN, cs, SYN | ACK),
        _frame(c, s, cs, ss, ACK),
        # request: second half first (out of order), then the first, then a retransmission
        _frame(c, s, cs + 20, ss, ACK | PSH, req2),
        _frame(c, s, cs, ss, ACK, req1),
        _frame(c, s, cs, ss, ACK | PSH, REQUEST),  # whole request again (duplicate)
        _frame(s, c, ss, cs + len(REQUEST), ACK),
        # response in 1000-byte segments: 0, 2, 1 (out of order), 1 again, an overlap of 1-2
        _frame(s, c, ss + 0, cs + len(REQUEST), ACK, seg(0, 1000)),
        _frame(s, c, ss + 2000, cs + len(REQUEST), ACK, seg(2000, 3000)),
        _frame(s, c, ss + 1000, cs + len(REQUEST), ACK, seg(1000, 2000)),
        _frame(s, c, ss + 1000, cs + len(REQUEST), ACK, seg(1000, 2000)),
        _frame(s, c, ss + 1500, cs + len(REQUEST), ACK, seg(1500, 2500)),
        # the tail: a segment that overlaps the end of what we have and extends it
        _frame(s, c, ss + 2900, cs + len(REQUEST), ACK | PSH, seg(2900, len(r))),
        _frame(c, s, cs + len(REQUEST), ss + len(r), ACK),
        _frame(c, s, cs + len(REQUEST), ss + len(r), FIN | ACK),
        _frame(s, c, ss + len(r), cs + len(REQUEST) + 1, FIN | ACK),
        _frame(c, s, cs + len(REQUEST) + 1, ss + len(r) + 1, ACK),
    ]
    return f


def write_pcap(path: str, frames: List[bytes], t0: float = 1700000000.0) -> None:
    with open(path, "wb") as fh:
        w = dpkt.pcap.Writer(fh, linktype=dpkt.pcap.DLT_EN10MB)
        for i, fr in enumerate(frames):
            w.writepkt(fr, ts=t0 + i * 0.001)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "examples/pcaps/tcp_ooo_retrans.pcap"
    write_pcap(out, tcp_frames())
    print(f"wrote {out}")
