"""The TRex import paths exist only while a profile loads, bring what TRex's star import
brings, and leave sys.modules as they found it."""

from __future__ import annotations

import sys
import types

from squall.compat import ALIASES, trex_modules


def test_star_import_namespace() -> None:
    with trex_modules():
        ns: dict = {}
        exec("from trex.astf.api import *", ns)
    for name in ("ASTFProgram", "ASTFProfile", "ASTFCapInfo", "ASTFGlobalInfo", "ASTFGlobalInfoPerTemplate",
                 "ASTFIPGen", "ASTFIPGenDist", "ASTFIPGenGlobal", "ASTFTemplate", "ASTFTCPClientTemplate",
                 "ASTFTCPServerTemplate", "ASTFAssociation", "ASTFAssociationRule", "ASTFCmdDelay",
                 "TRexError", "ASTFError", "os", "sys", "json", "inspect", "traceback", "collections"):
        assert name in ns, name
    assert isinstance(ns["os"], types.ModuleType)


def test_other_import_forms() -> None:
    with trex_modules():
        ns: dict = {}
        exec("import trex.astf.api as api\nfrom trex.astf.trex_astf_profile import ASTFProgram\n"
             "from trex.common.trex_exceptions import TRexError\nimport trex_astf_lib.api\n"
             "from trex.astf.trex_astf_global_info import ASTFGlobalInfo", ns)
        assert ns["api"].ASTFProgram is ns["ASTFProgram"]
    for name in ALIASES:
        assert name not in sys.modules


def test_previous_modules_are_restored() -> None:
    fake = types.ModuleType("trex")
    sys.modules["trex"] = fake
    try:
        with trex_modules():
            assert sys.modules["trex"] is not fake
        assert sys.modules["trex"] is fake
        assert "trex.astf" not in sys.modules
    finally:
        del sys.modules["trex"]
