"""W1 (shared BENCHMARKS.md): one new TCP connection per request.

200 clients 16.0.0.1-16.0.0.200 (seq), server 48.0.0.1:80, a 100-byte GET, a
32,768-byte response (headers + body, Content-Length correct), MSS 1460, initial window
2 segments, delayed ACK 100 ms. The client closes after the last byte; the server
closes on the client's FIN. Compiles to the equivalent of w1-astf-http.json.

    python3 -m squall.compile examples/w1-astf-http.py [-t initwnd=10]
"""

from squall.astf import (ASTFAssociationRule, ASTFGlobalInfo, ASTFIPGen, ASTFIPGenDist,
                         ASTFIPGenGlobal, ASTFProfile, ASTFProgram, ASTFTCPClientTemplate,
                         ASTFTCPServerTemplate, ASTFTemplate)

REQUEST_SIZE = 100
RESPONSE_SIZE = 32768


def http_request() -> bytes:
    head = "GET /w1 HTTP/1.1\r\nHost: 48.0.0.1\r\nUser-Agent: squall\r\nAccept: */*\r\nConnection: close\r\n"
    pad = REQUEST_SIZE - len(head) - len("X-Pad: \r\n\r\n")
    req = (head + "X-Pad: " + "p" * pad + "\r\n\r\n").encode()
    assert len(req) == REQUEST_SIZE
    return req


def http_response_head() -> bytes:
    """Status line and headers; the body (`x` bytes) fills the rest up to RESPONSE_SIZE."""
    def head(body_len: int) -> bytes:
        return ("HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Type: text/html\r\nConnection: close\r\n"
                f"Content-Length: {body_len}\r\n\r\n").encode()
    h = head(RESPONSE_SIZE - 100)
    h = head(RESPONSE_SIZE - len(h))  # the length of the number does not change
    assert len(h) + int(h.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == RESPONSE_SIZE
    return h


class W1:
    def get_profile(self, tunables=None, **kwargs):
        req = http_request()
        prog_c = ASTFProgram()
        prog_c.send(req)
        prog_c.recv(RESPONSE_SIZE)  # implicit close after the last byte

        prog_s = ASTFProgram()
        prog_s.recv(len(req))
        prog_s.send(http_response_head(), size=RESPONSE_SIZE, fill="x")
        prog_s.wait_for_peer_close()

        ip_gen = ASTFIPGen(glob=ASTFIPGenGlobal(ip_offset="1.0.0.0"),
                           dist_client=ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.200"], distribution="seq"),
                           dist_server=ASTFIPGenDist(ip_range=["48.0.0.1", "48.0.0.1"], distribution="seq"))

        info = ASTFGlobalInfo()
        info.tcp.mss = 1460
        info.tcp.initwnd = int(kwargs.get("initwnd", 2))
        info.tcp.delay_ack_msec = 100
        info.scheduler.rampup_sec = 0
        info.scheduler.spacing = "even"

        template = ASTFTemplate(
            client_template=ASTFTCPClientTemplate(program=prog_c, ip_gen=ip_gen, port=80, cps=1),
            server_template=ASTFTCPServerTemplate(
                program=prog_s, assoc=ASTFAssociationRule(port=80, ip_start="48.0.0.1", ip_end="48.0.0.1")),
            tg_name="http")
        return ASTFProfile(default_ip_gen=ip_gen, templates=template,
                           default_c_glob_info=info, default_s_glob_info=info)


def register():
    return W1()
