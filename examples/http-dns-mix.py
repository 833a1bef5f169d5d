"""A mix: HTTP over TCP and a DNS-like request/response over UDP, in two template groups.

The rate ramps up over 5 seconds and flow starts are Poisson-spaced. `-t http_cps=N`
and `-t dns_cps=N` change the rates.
"""

import struct

from squall.astf import (ASTFAssociationRule, ASTFGlobalInfo, ASTFIPGen, ASTFIPGenDist,
                         ASTFProfile, ASTFProgram, ASTFTCPClientTemplate, ASTFTCPServerTemplate,
                         ASTFTemplate)


def dns_query(qid: int, name: str) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + labels + struct.pack("!HH", 1, 1)


def dns_answer(query: bytes, addr: bytes) -> bytes:
    hdr = query[:2] + struct.pack("!HHHHH", 0x8180, 1, 1, 0, 0)
    rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + addr
    return hdr + query[12:] + rr


class Mix:
    def get_profile(self, http_cps=100, dns_cps=50):
        ip_gen = ASTFIPGen(dist_client=ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.100"]),
                           dist_server=ASTFIPGenDist(ip_range=["48.0.0.1", "48.0.0.4"]))

        req = b"GET /index.html HTTP/1.1\r\nHost: www.example.test\r\n\r\n"
        body = b"<html>" + b"m" * 1987 + b"</html>"
        resp = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        http_c = ASTFProgram()
        http_c.send(req)
        http_c.recv(len(resp))
        http_s = ASTFProgram()
        http_s.recv(len(req))
        http_s.send(resp)
        http_s.wait_for_peer_close()

        query = dns_query(0x1234, "www.example.test")
        dns_c = ASTFProgram(stream=False)
        dns_c.set_keepalive_msg(2000)
        dns_c.send_msg(query)
        dns_c.recv_msg(1)
        dns_s = ASTFProgram(stream=False)
        dns_s.set_keepalive_msg(2000)
        dns_s.recv_msg(1)
        dns_s.send_msg(dns_answer(query, bytes([198, 18, 0, 80])))

        info = ASTFGlobalInfo()
        info.scheduler.rampup_sec = 5
        info.scheduler.spacing = "poisson"

        http = ASTFTemplate(client_template=ASTFTCPClientTemplate(program=http_c, ip_gen=ip_gen, port=80,
                                                                  cps=http_cps),
                            server_template=ASTFTCPServerTemplate(program=http_s,
                                                                  assoc=ASTFAssociationRule(port=80)),
                            tg_name="http")
        dns = ASTFTemplate(client_template=ASTFTCPClientTemplate(program=dns_c, ip_gen=ip_gen, port=53,
                                                                 cps=dns_cps),
                           server_template=ASTFTCPServerTemplate(program=dns_s,
                                                                 assoc=ASTFAssociationRule(port=53)),
                           tg_name="dns")
        return ASTFProfile(default_ip_gen=ip_gen, templates=[http, dns],
                           default_c_glob_info=info, default_s_glob_info=info)


def register():
    return Mix()
