# A TRex ASTF profile using TRex's IPv6 tunables, written as TRex's param_ipv6.py is
# (imports unchanged): IPv4 pools; ipv6.enable with src_msb/dst_msb on the client's
# default ASTFGlobalInfo; each flow's addresses are the msb with the pool value as the
# low 32 bits (16.0.0.1 -> 2001:db8:0:2222::1000:1, 48.0.0.1 -> 2001:db8:2:2222::3000:1).

from trex.astf.api import *

http_req = b'GET /v6 HTTP/1.1\r\nHost: [2001:db8:2:2222::3000:1]\r\nConnection: close\r\n\r\n'
http_response = 'HTTP/1.1 200 OK\r\nServer: squall\r\nContent-Length: 4000\r\n\r\n' + '6' * 4000


class Prof1():
    def __init__(self):
        pass

    def get_profile(self, **kwargs):
        prog_c = ASTFProgram()
        prog_c.connect()
        prog_c.send(http_req)
        prog_c.recv(len(http_response))

        prog_s = ASTFProgram()
        prog_s.recv(len(http_req))
        prog_s.send(http_response)
        prog_s.wait_for_peer_close()

        # ip generator
        ip_gen_c = ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.255"], distribution="seq")
        ip_gen_s = ASTFIPGenDist(ip_range=["48.0.0.1", "48.0.0.4"], distribution="seq")
        ip_gen = ASTFIPGen(glob=ASTFIPGenGlobal(ip_offset="1.0.0.0"),
                           dist_client=ip_gen_c,
                           dist_server=ip_gen_s)

        c_glob_info = ASTFGlobalInfo()
        # Enable IPV6 for client side and set the default SRC/DST IPv6 MSB
        # LSB will be taken from ip generator
        c_glob_info.ipv6.src_msb = "2001:DB8:0:2222::"
        c_glob_info.ipv6.dst_msb = "2001:DB8:2:2222::"
        c_glob_info.ipv6.enable = 1

        temp_c = ASTFTCPClientTemplate(program=prog_c, ip_gen=ip_gen, cps=100)
        temp_s = ASTFTCPServerTemplate(program=prog_s)
        template = ASTFTemplate(client_template=temp_c, server_template=temp_s, tg_name="v6")

        return ASTFProfile(default_ip_gen=ip_gen,
                           default_c_glob_info=c_glob_info,
                           templates=template)


def register():
    return Prof1()
