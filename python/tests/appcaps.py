"""Synthetic captures of real application conversations, for the replay-pace tests.

Each conversation is a list of bursts: (direction, segment payload sizes), one segment per
frame as the application's stack cut it, PSH on the last segment of a burst and ACKs in
between as a Linux peer would send them. The shapes follow real sessions: most bursts
have an odd number of segments and end with a short one (the pattern that made a Nagle
sender wait on a delayed ACK), some have a single short segment, and a few (TLS, SMTP)
send several short segments back to back. Payload bytes are deterministic, so the files
are reproducible.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import capgen

MSS = 1448
Burst = Tuple[str, List[int]]  # ("c" | "s", payload size of each segment)

# TLS 1.2 over HTTPS: hello, certificate chain (3 segments, short last), key exchange and
# finished (3 short records back to back), ticket + finished, request, 7-segment answer.
HTTPS: List[Burst] = [
    ("c", [517]),
    ("s", [MSS, MSS, 1100]),
    ("c", [93, 6, 45]),
    ("s", [258]),
    ("c", [600]),
    ("s", [MSS] * 6 + [700]),
    ("c", [31]),
]
# HTTP POST of a form upload: headers and body in 5 segments (short last), short answer.
HTTP_POST: List[Burst] = [
    ("c", [MSS, MSS, MSS, MSS, 320]),
    ("s", [230]),
]
# SMTP: the server speaks first; commands and replies, a 3-segment message body followed
# by the lone "." line, QUIT.
SMTP: List[Burst] = [
    ("s", [40]),
    ("c", [20]),
    ("s", [150]),
    ("c", [30]),
    ("s", [15]),
    ("c", [28]),
    ("s", [15]),
    ("c", [6]),
    ("s", [40]),
    ("c", [MSS, MSS, 900]),
    ("c", [5]),
    ("s", [30]),
    ("c", [6]),
    ("s", [20]),
]
# A remote-desktop session: connection setup, then screen updates (odd bursts, short
# last) answered by small input events, some sent two at a time.
RDP: List[Burst] = [
    ("c", [19]),
    ("s", [19]),
    ("c", [450]),
    ("s", [MSS, 300]),
    ("c", [12]),
    ("s", [11]),
    ("c", [40, 40]),
    ("s", [MSS, MSS, MSS, 500]),
    ("c", [30]),
    ("s", [MSS, MSS, 400]),
    ("c", [30, 12]),
    ("s", [MSS, 900]),
    ("c", [30]),
    ("s", [MSS] * 4 + [64]),
]

APPS: Dict[str, Tuple[List[Burst], int]] = {
    "https": (HTTPS, 443),
    "http_post": (HTTP_POST, 80),
    "smtp": (SMTP, 25),
    "rdp": (RDP, 3389),
}


def frames(bursts: List[Burst], port: int) -> List[bytes]:
    """The frames of one conversation: handshake, the bursts, FIN from the client."""
    c, s = ("198.18.9.2", 41000), ("198.18.9.1", port)
    SYN, ACK, FIN, PSH = capgen.SYN, capgen.ACK, capgen.FIN, capgen.PSH
    f = capgen._frame
    nxt = {"c": 1001, "s": 5001}
    out = [f(c, s, 1000, 0, SYN), f(s, c, 5000, 1001, SYN | ACK), f(c, s, 1001, 5001, ACK)]
    k = 0
    for side, sizes in bursts:
        src, dst = (c, s) if side == "c" else (s, c)
        other = "s" if side == "c" else "c"
        for n, size in enumerate(sizes):
            data = bytes((k + j * 13) % 251 for j in range(size))
            k += 1
            last = n == len(sizes) - 1
            out.append(f(src, dst, nxt[side], nxt[other], ACK | (PSH if last else 0), data))
            nxt[side] += size
            if n % 2 == 1 or last:  # every second segment, and the end of the burst
                out.append(f(dst, src, nxt[other], nxt[side], ACK))
    out.append(f(c, s, nxt["c"], nxt["s"], FIN | ACK))
    out.append(f(s, c, nxt["s"], nxt["c"] + 1, FIN | ACK))
    out.append(f(c, s, nxt["c"] + 1, nxt["s"] + 1, ACK))
    return out


def write_all(folder: str) -> Dict[str, str]:
    """Writes every conversation as FOLDER/NAME.pcap; returns {name: path}."""
    paths = {}
    for name, (bursts, port) in APPS.items():
        p = f"{folder}/{name}.pcap"
        capgen.write_pcap(p, frames(bursts, port))
        paths[name] = p
    return paths


def payload_bytes(name: str) -> Tuple[int, int]:
    """(client, server) payload bytes of conversation NAME."""
    bursts = APPS[name][0]
    return (sum(sum(b) for d, b in bursts if d == "c"), sum(sum(b) for d, b in bursts if d == "s"))
