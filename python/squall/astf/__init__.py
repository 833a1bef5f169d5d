"""TRex ASTF-compatible profile API: `from squall.astf import *`.

The classes carry TRex's names and signatures; a profile builds an `ASTFProfile` and
`ASTFProfile.to_json()` compiles it to Squall's JSON IR (docs/PROFILE.md). Every error
is a `ProfileError` naming the field and the Python line that caused it.
"""

from ..errors import ProfileError, Site
from .glob_info import ASTFGlobalInfo, ASTFGlobalInfoBase, ASTFGlobalInfoPerTemplate
from .ipgen import ASTFIPGen, ASTFIPGenDist, ASTFIPGenGlobal
from .profile import ASTFProfile
from .program import (ASTFCmd, ASTFCmdCloseMsg, ASTFCmdConnect, ASTFCmdDelay, ASTFCmdDelayRnd,
                      ASTFCmdKeepaliveMsg, ASTFCmdNoClose, ASTFCmdRecv, ASTFCmdRecvMsg, ASTFCmdReset,
                      ASTFCmdSend, ASTFCmdTxMode, ASTFCmdTxPkt, ASTFProgram)
from .templates import (ASTFAssociation, ASTFAssociationRule, ASTFCapInfo, ASTFCluster,
                        ASTFTCPClientTemplate, ASTFTCPServerTemplate, ASTFTemplate)

ASTFError = ProfileError

__all__ = [
    "ASTFAssociation", "ASTFAssociationRule", "ASTFCapInfo", "ASTFCluster", "ASTFCmd",
    "ASTFCmdCloseMsg", "ASTFCmdConnect", "ASTFCmdDelay", "ASTFCmdDelayRnd", "ASTFCmdKeepaliveMsg",
    "ASTFCmdNoClose", "ASTFCmdRecv", "ASTFCmdRecvMsg", "ASTFCmdReset", "ASTFCmdSend", "ASTFCmdTxMode",
    "ASTFCmdTxPkt", "ASTFError", "ASTFGlobalInfo", "ASTFGlobalInfoBase",
    "ASTFGlobalInfoPerTemplate", "ASTFIPGen", "ASTFIPGenDist", "ASTFIPGenGlobal", "ASTFProfile",
    "ASTFProgram", "ASTFTCPClientTemplate", "ASTFTCPServerTemplate", "ASTFTemplate",
    "ProfileError", "Site",
]
