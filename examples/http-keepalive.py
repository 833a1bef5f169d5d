"""The HTTP-aware generator (docs/HTTP.md): keep-alive connections of 10 requests each.

The client sends each request with `http_request` — a URL of a list in turn, a
User-Agent chosen per flow — and waits with `http_wait_response` for the end of the
response as HTTP frames it (here: chunked, with a trailer), not for a byte count. The
server is a plain Squall program answering every request (fixed size: the URLs and the
User-Agents have equal lengths) with the same chunked response; `squall run` reports the
status codes, body bytes and per-request latency of the `http` group. Against a real
server (nginx, `squall serve`) only the client side is used (`--mode client`).

    squall run examples/http-keepalive.py --sim -d 2 -m 10
"""

from squall.astf import (ASTFAssociationRule, ASTFGlobalInfo, ASTFIPGen, ASTFIPGenDist,
                         ASTFIPGenGlobal, ASTFProfile, ASTFProgram, ASTFTCPClientTemplate,
                         ASTFTCPServerTemplate, ASTFTemplate)

ROUNDS = 10
URLS = ["/a.html", "/b.html", "/c.html"]
AGENTS = ["squall/1.0", "curl/8.5.0", "wget/1.2.1"]
HEADERS = {"Host": "48.0.0.1", "User-Agent": AGENTS, "Accept": "*/*"}


def request_size() -> int:
    """Bytes of one request as the generator builds it (every URL and agent alike)."""
    lines = [f"GET {URLS[0]} HTTP/1.1"] + [f"{k}: {v if isinstance(v, str) else v[0]}"
                                           for k, v in HEADERS.items()]
    return len("\r\n".join(lines)) + 4


def chunked_response() -> bytes:
    body = [b"<html><body>", b"squall" * 50, b"</body></html>\n"]
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in body)
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunks + b"0\r\nX-Trailer: done\r\n\r\n")


class HttpKeepalive:
    def get_profile(self, tunables=None, **kwargs):
        prog_c = ASTFProgram()
        prog_c.set_var("n", ROUNDS)
        prog_c.set_label("next")
        prog_c.http_request("GET", URLS, headers=HEADERS)
        prog_c.http_wait_response()
        prog_c.jmp_nz("n", "next")  # then the program ends: FIN

        prog_s = ASTFProgram()
        prog_s.set_var("n", ROUNDS)
        prog_s.set_label("next")
        prog_s.recv(request_size(), clear=True)
        prog_s.send(chunked_response())
        prog_s.jmp_nz("n", "next")
        prog_s.wait_for_peer_close()

        ip_gen = ASTFIPGen(glob=ASTFIPGenGlobal(ip_offset="1.0.0.0"),
                           dist_client=ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.200"], distribution="seq"),
                           dist_server=ASTFIPGenDist(ip_range=["48.0.0.1", "48.0.0.1"], distribution="seq"))
        info = ASTFGlobalInfo()
        info.tcp.initwnd = 10
        template = ASTFTemplate(
            client_template=ASTFTCPClientTemplate(program=prog_c, ip_gen=ip_gen, port=80, cps=10),
            server_template=ASTFTCPServerTemplate(
                program=prog_s, assoc=ASTFAssociationRule(port=80, ip_start="48.0.0.1", ip_end="48.0.0.1")),
            tg_name="http")
        return ASTFProfile(default_ip_gen=ip_gen, templates=template,
                           default_c_glob_info=info, default_s_glob_info=info)


def register():
    return HttpKeepalive()
