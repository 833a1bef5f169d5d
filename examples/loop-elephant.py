"""An elephant flow: one long connection, N rounds of request -> 64 KiB answer.

Flow variables and jumps make the loop (`set_var` / `set_label` / `jmp_nz`); `recv` with
`clear=True` restarts the byte count each round. Sends are non-blocking so the server
keeps its window full. `-t rounds=N` changes the number of rounds.
"""

from squall.astf import (ASTFAssociationRule, ASTFGlobalInfo, ASTFIPGen, ASTFIPGenDist, ASTFProfile, ASTFProgram,
                         ASTFTCPClientTemplate, ASTFTCPServerTemplate, ASTFTemplate)

CHUNK = 65536


class Elephant:
    def get_profile(self, rounds=1000):
        req = b"NEXT\r\n"
        prog_c = ASTFProgram()
        prog_c.set_var("rounds", rounds)
        prog_c.set_label("round")
        prog_c.send(req)
        prog_c.recv(CHUNK, clear=True)
        prog_c.jmp_nz("rounds", "round")

        prog_s = ASTFProgram()
        prog_s.set_send_blocking(False)
        prog_s.set_var("rounds", rounds)
        prog_s.set_label("round")
        prog_s.recv(len(req), clear=True)
        prog_s.send(b"DATA\r\n", size=CHUNK, fill=b"e")
        prog_s.jmp_nz("rounds", "round")
        prog_s.wait_for_peer_close()

        info = ASTFGlobalInfo()
        info.tcp.rxbufsize = 262144
        info.tcp.txbufsize = 262144

        ip_gen = ASTFIPGen(dist_client=ASTFIPGenDist(ip_range=["16.0.0.1", "16.0.0.1"]),
                           dist_server=ASTFIPGenDist(ip_range=["48.0.0.1", "48.0.0.1"]))
        template = ASTFTemplate(
            client_template=ASTFTCPClientTemplate(program=prog_c, ip_gen=ip_gen, port=5001, cps=1, limit=1),
            server_template=ASTFTCPServerTemplate(program=prog_s,
                                                  assoc=ASTFAssociationRule(port=5001)),
            tg_name="elephant")
        return ASTFProfile(default_ip_gen=ip_gen, templates=template,
                           default_c_glob_info=info, default_s_glob_info=info)


def register():
    return Elephant()
