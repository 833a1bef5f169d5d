"""`ASTFProfile`: a whole profile, compiled to Squall's JSON IR version 1 by `to_json()`.

The IR (schema/profile-v1.schema.json, docs/PROFILE.md) references objects by name:
buffers are interned (identical payloads are stored once), identical programs and
generators are shared. Checks that need the whole profile (overlapping client pools,
two templates on one server port, a `recv` waiting for more than the peer ever sends)
are made here and reported at the user's line that created the object at fault.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .. import __version__
from ..errors import ProfileError, user_site
from .capture import Conversation, load_conversation
from .glob_info import ASTFGlobalInfo, Value
from .ipgen import ASTFIPGen
from .program import ASTFCmd, ASTFCmdDelay, ASTFCmdDelayRnd, ASTFProgram, Buffer
from .templates import (ASTFAssociation, ASTFAssociationRule, ASTFCapInfo, ASTFTCPClientTemplate,
                        ASTFTCPServerTemplate, ASTFTemplate, _check_type)

IR_VERSION = 1
# With l7_percent, multiplier 1 means this many bytes/s of L7 payload over all caps.
L7_PERCENT_BASE_BYTES_PER_SEC = 125000.0


class ASTFProfile:
    """A profile: templates (manual or from captures) plus default generator and tunables.

    ```
    return ASTFProfile(default_ip_gen=ip_gen, templates=template)
    return ASTFProfile(default_ip_gen=ip_gen, cap_list=[ASTFCapInfo(file="x.pcap", cps=10)])
    ```
    """

    def __init__(self, default_ip_gen: ASTFIPGen, default_c_glob_info: Optional[ASTFGlobalInfo] = None,
                 default_s_glob_info: Optional[ASTFGlobalInfo] = None,
                 templates: Union[ASTFTemplate, Sequence[ASTFTemplate], None] = None,
                 cap_list: Union[ASTFCapInfo, Sequence[ASTFCapInfo], None] = None,
                 s_delay: Optional[ASTFCmd] = None, udp_mtu: Optional[int] = None) -> None:
        self.site = user_site()
        cls = "ASTFProfile"
        _check_type(cls, "default_ip_gen", default_ip_gen, ASTFIPGen, self.site)
        _check_type(cls, "default_c_glob_info", default_c_glob_info, ASTFGlobalInfo, self.site, must=False)
        _check_type(cls, "default_s_glob_info", default_s_glob_info, ASTFGlobalInfo, self.site, must=False)
        _check_type(cls, "s_delay", s_delay, (ASTFCmdDelay, ASTFCmdDelayRnd), self.site, must=False)
        if templates is None and cap_list is None:
            raise ProfileError(f'When creating "{cls}", must specify one of "templates" and "cap_list"',
                               self.site, "templates")
        self.default_ip_gen = default_ip_gen
        self.default_c_glob_info = default_c_glob_info
        self.default_s_glob_info = default_s_glob_info
        self.meta: Dict[str, Any] = {}
        self.templates: List[ASTFTemplate] = []
        if templates is not None:
            lst = [templates] if isinstance(templates, ASTFTemplate) else list(templates)
            for t in lst:
                _check_type(cls, "templates", t, ASTFTemplate, self.site)
            self.templates.extend(lst)
        if cap_list is not None:
            caps = [cap_list] if isinstance(cap_list, ASTFCapInfo) else list(cap_list)
            for c in caps:
                _check_type(cls, "cap_list", c, ASTFCapInfo, self.site)
            self.templates.extend(self._from_caps(caps, s_delay, udp_mtu))
        seen: Dict[Tuple[int, bool], ASTFTemplate] = {}
        for t in self.templates:
            a = t.server_template.assoc
            if a.is_port_only():
                # IPv4 and IPv6 templates may share a port: each family finds its own.
                k = (a.port, self._is_ipv6(t))
                if k in seen:
                    raise ProfileError(f"two server templates accept port {a.port} (the other one: "
                                       f"{seen[k].site}); give them address ranges with "
                                       f"ASTFAssociationRule(ip_start=, ip_end=)", t.site, "assoc")
                seen[k] = t

    def _is_ipv6(self, t: ASTFTemplate) -> bool:
        """Whether a template's flows go over IPv6: native IPv6 pools, or the client side's
        `ipv6.enable` in the profile's or the template's tunables (TRex gives the profile's
        priority: a template can add IPv6, not take it away)."""
        g = t.client_template.ip_gen
        if g.dist_client.is_ipv6:
            return True
        return any(info is not None and bool(info.section("ipv6").get("enable"))
                   for info in (t.client_template.glob_info, self.default_c_glob_info))

    def _from_caps(self, caps: List[ASTFCapInfo], s_delay: Optional[ASTFCmd],
                   udp_mtu: Optional[int]) -> List[ASTFTemplate]:
        modes = {c.l7_percent is not None for c in caps}
        if len(modes) > 1:
            raise ProfileError("cap_list mixes cps and l7_percent: give all caps the same kind of rate",
                               caps[0].site, "l7_percent")
        loaded: List[Tuple[ASTFCapInfo, Conversation]] = []
        for c in caps:
            loaded.append((c, load_conversation(c.path, c.site)))
        if modes == {True}:
            total = sum(float(c.l7_percent or 0) for c in caps)
            if abs(total - 100.0) > 1e-6:
                raise ProfileError(f"l7_percent values must sum up to 100, they sum to {total:g}",
                                   caps[0].site, "l7_percent")
        out: List[ASTFTemplate] = []
        for c, conv in loaded:
            mtu = c.udp_mtu if c.udp_mtu is not None else udp_mtu
            prog_c = ASTFProgram.from_conversation(conv, "c", c.site, None, mtu)
            prog_s = ASTFProgram.from_conversation(conv, "s", c.site, c.s_delay or s_delay, mtu)
            if c.l7_percent is not None:
                cps = float(c.l7_percent) / 100.0 * L7_PERCENT_BASE_BYTES_PER_SEC / max(1, conv.payload_len)
            else:
                cps = float(c.cps if c.cps is not None else 1)
            if c.assoc is not None:
                port = c.assoc.port
                assoc = c.assoc
            else:
                port = c.port if c.port is not None else conv.server_port
                assoc = ASTFAssociation(ASTFAssociationRule(port=port))
            ip_gen = c.ip_gen if c.ip_gen is not None else self.default_ip_gen
            tc = ASTFTCPClientTemplate(ip_gen=ip_gen, program=prog_c, port=port, cps=cps,
                                       glob_info=c.c_glob_info, limit=c.limit)
            ts = ASTFTCPServerTemplate(program=prog_s, assoc=assoc, glob_info=c.s_glob_info)
            t = ASTFTemplate(client_template=tc, server_template=ts, tg_name=c.tg_name)
            for obj in (tc, ts, t):
                obj.site = c.site
            out.append(t)
        return out

    # ---- compile -----------------------------------------------------------------------

    def to_json(self) -> Dict[str, Any]:
        """The profile as the JSON IR (a dict ready for `json.dumps`)."""
        buffers: Dict[Buffer, str] = {}

        def intern(b: Buffer) -> str:
            if b not in buffers:
                buffers[b] = f"buf{len(buffers)}"
            return buffers[b]

        gens: List[Tuple[Any, str, ASTFIPGen]] = []
        programs: Dict[str, Dict[str, Any]] = {}  # json of commands -> program
        prog_names: set[str] = set()
        templates: List[Dict[str, Any]] = []
        for i, t in enumerate(self.templates):
            ct, st = t.client_template, t.server_template
            self._check_reachable(ct.program, st.program, "client", "server")
            self._check_reachable(st.program, ct.program, "server", "client")
            gen_name = self._gen_name(ct.ip_gen, gens)
            base = (t.tg_name or f"t{i}")[:40]  # names are at most 64 characters
            names = []
            for prog, role in ((ct.program, "client"), (st.program, "server")):
                ir = prog.to_ir("", intern)
                key = json.dumps(ir["commands"], sort_keys=True)
                if key not in programs:
                    name = f"{base}_{role}"
                    if name in prog_names:
                        name = f"{base}_{i}_{role}"
                    prog_names.add(name)
                    ir["name"] = name
                    programs[key] = ir
                names.append(programs[key]["name"])
            tj: Dict[str, Any] = {}
            if t.name is not None:
                tj["name"] = t.name
            if t.tg_name is not None:
                tj["tg_name"] = t.tg_name
            tj["transport"] = "tcp" if ct.program.stream else "udp"
            tj["client_program"], tj["server_program"] = names
            tj["ip_gen"] = gen_name
            tj["port"] = ct.port
            tj["cps"] = ct.cps
            if ct.limit:
                tj["limit"] = ct.limit
            tj["assoc"] = st.assoc.to_json()
            if ct.glob_info is not None and ct.glob_info.to_json():
                tj["client_tunables"] = ct.glob_info.to_json()
            if st.glob_info is not None and st.glob_info.to_json():
                tj["server_tunables"] = st.glob_info.to_json()
            templates.append(tj)
        if not templates:
            raise ProfileError("the profile has no templates", self.site, "templates")
        out: Dict[str, Any] = {
            "version": IR_VERSION,
            "meta": dict({"generator": f"squall-python {__version__}"}, **self.meta),
            "buffers": [b.to_ir(n) for b, n in buffers.items()],
            "ip_gens": [g.to_json(n) for _, n, g in gens],
            "programs": list(programs.values()),
            "templates": templates,
        }
        glob = self._global()
        if glob:
            out["global"] = glob
        return out

    def print_stats(self) -> None:
        """Print buffers, programs and each template's bytes per flow and L7 rate (TRex)."""
        ir = self.to_json()
        print(f"Num buffers: {len(ir['buffers'])}")
        print(f"Num programs: {len(ir['programs'])}")
        tot_bps = 0.0
        tot_cps = 0.0
        for i, t in enumerate(self.templates):
            ct, st = t.client_template, t.server_template
            nbytes = ct.program.total_send_bytes + st.program.total_send_bytes
            bps = nbytes * ct.cps * 8
            print(f"template {i}:")
            print(f"  total bytes:{nbytes} cps:{ct.cps} bps(bytes * cps * 8):{bps:g}")
            tot_bps += bps
            tot_cps += ct.cps
        print(f"total for all templates - cps:{tot_cps:g} bps:{tot_bps:g}")

    def to_json_str(self, pretty: bool = True, sort_keys: bool = False) -> str:
        """`to_json()` as a string (indented when `pretty`)."""
        data = self.to_json()
        if pretty:
            return json.dumps(data, indent=2, sort_keys=sort_keys)
        return json.dumps(data, sort_keys=sort_keys)

    def _gen_name(self, g: ASTFIPGen, gens: List[Tuple[Any, str, ASTFIPGen]]) -> str:
        key = g.key()
        for k, n, _ in gens:
            if k == key:
                return n
        for _, n, other in gens:
            if g.dist_client is other.dist_client:
                # One ASTFIPGenDist in several generators: one shared pool (TRex: one
                # distribution), compiled as identical client pools.
                if g.glob.ip_offset != other.glob.ip_offset:
                    raise ProfileError("this ASTFIPGenDist is shared with another ASTFIPGen whose "
                                       f"ip_offset differs ({other.glob.ip_offset} at {other.site}): "
                                       "a shared client pool has one ip_offset", g.site, "glob")
                continue
            if g.dist_client.key() == other.dist_client.key() and g.glob.ip_offset == other.glob.ip_offset:
                # Equal pools, two objects: TRex compares distributions by value
                # (ASTFIPGenDistCache), so they are one shared pool too.
                continue
            if g.dist_client.overlaps(other.dist_client):
                raise ProfileError(f"client pool {g.dist_client.ip_start}-{g.dist_client.ip_end} overlaps "
                                   f"{other.dist_client.ip_start}-{other.dist_client.ip_end} of another "
                                   f"generator (created at {other.dist_client.site})",
                                   g.dist_client.site, "ip_range")
        name = "default" if key == self.default_ip_gen.key() else f"ip_gen{len(gens)}"
        if any(n == name for _, n, _ in gens):
            name = f"ip_gen{len(gens)}"
        gens.append((key, name, g))
        return name

    @staticmethod
    def _check_reachable(waiter: ASTFProgram, sender: ASTFProgram, wname: str, sname: str) -> None:
        if waiter.has_jumps() or sender.has_jumps() or waiter.has_http() or sender.has_http():
            return
        need, site = waiter.recv_need()
        have = sender.send_total()
        if need > have:
            unit = "bytes" if waiter.stream else "datagrams"
            raise ProfileError(f"the {wname} program waits for {need} {unit} in total but the {sname} "
                               f"program sends only {have}: the flow would hang", site, "recv")

    def _global(self) -> Dict[str, Any]:
        c = self.default_c_glob_info
        s = self.default_s_glob_info
        glob_only = ("scheduler",)  # global sections of the IR
        cs = {k: v for k, v in (c.to_json() if c else {}).items() if k not in glob_only}
        ss = {k: v for k, v in (s.to_json() if s else {}).items() if k not in glob_only}
        # The scheduler is the client's (TRex reads `scheduler.*` from the client side's
        # tunables only; the server side's are ignored there, and here).
        sched: Dict[str, Value] = c.section("scheduler") if c else {}
        out: Dict[str, Any] = {}
        if c is not None and s is not None and cs == ss:
            out.update(cs)
        else:
            if cs:
                out["client"] = cs
            if ss:
                out["server"] = ss
        if sched:
            out["scheduler"] = sched
        return out

    # ---- TRex-style loading ----------------------------------------------------------------

    @classmethod
    def load_py(cls, python_file: str, **kwargs: Any) -> "ASTFProfile":
        """Load a Python profile file (TRex `ASTFProfile.load_py`); kwargs are tunables."""
        from ..compat import trex_modules
        from ..loader import load_profile

        with trex_modules():
            return load_profile(python_file, {k: str(v) for k, v in kwargs.items()})

    @classmethod
    def load(cls, filename: str, **kwargs: Any) -> "ASTFProfile":
        """Load a `.py` profile (TRex `ASTFProfile.load`)."""
        if not filename.endswith(".py"):
            raise ProfileError(f"{filename}: only .py profiles can be loaded from Python; JSON IR files "
                               "go to the engine directly", None)
        return cls.load_py(filename, **kwargs)


