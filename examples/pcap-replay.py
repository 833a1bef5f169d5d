"""Templates taken from captures (examples/pcaps/, recorded by pcaps/record.sh):

* http_get.pcap      curl -> nginx, GET of a 2,000-byte file (port 80)
* dns_udp.pcapng     two DNS-like queries and answers over UDP (port 53)
* http_lossy.pcap    a 20,000-byte GET over a lossy link: retransmissions in the capture,
                     replayed on port 8081 (the converter keeps each byte once)

Paths are relative to this file's folder.
"""

from squall.astf import ASTFCapInfo, ASTFIPGen, ASTFIPGenDist, ASTFProfile


class PcapReplay:
    def get_profile(self, **kwargs):
        ip_gen = ASTFIPGen(dist_client=ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.50"]),
                           dist_server=ASTFIPGenDist(ip_range=["48.0.0.1", "48.0.0.1"]))
        return ASTFProfile(default_ip_gen=ip_gen, cap_list=[
            ASTFCapInfo(file="pcaps/http_get.pcap", cps=20, tg_name="http"),
            ASTFCapInfo(file="pcaps/dns_udp.pcapng", cps=10, tg_name="dns"),
            ASTFCapInfo(file="pcaps/http_lossy.pcap", cps=2, port=8081, tg_name="http_big"),
        ])


def register():
    return PcapReplay()
