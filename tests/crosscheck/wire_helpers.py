"""Helpers shared by the cross-check tests (scapy <-> wirecheck JSON)."""


def scapy_tcp_options(opts):
    """scapy's parsed option list in wirecheck's JSON form."""
    out = []
    for name, val in opts:
        if name == "EOL":
            out.append({"kind": "eol"})
        elif name == "NOP":
            out.append({"kind": "nop"})
        elif name == "MSS":
            out.append({"kind": "mss", "value": val})
        elif name == "WScale":
            out.append({"kind": "wscale", "value": val})
        elif name == "SAckOK":
            out.append({"kind": "sackok"})
        elif name == "Timestamp":
            out.append({"kind": "ts", "tsval": val[0], "tsecr": val[1]})
        elif name == "SAck":
            vals = list(val) if isinstance(val, tuple) else [val]
            out.append({"kind": "sack", "blocks": [[vals[i], vals[i + 1]] for i in range(0, len(vals), 2)]})
        else:
            out.append({"kind": "unknown", "type": name, "data": bytes(val).hex()})
    return out


def recomputed(s, frame, layer):
    """The checksum scapy computes for `layer` of `frame`."""
    p = s.Ether(frame)
    del p[layer].chksum
    return s.Ether(bytes(p))[layer].chksum
