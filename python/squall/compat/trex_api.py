"""What `from trex.astf.api import *` brings into a TRex profile, backed by squall.astf.

TRex's star import also brings the standard modules its profile module imported, and
profiles rely on that (`os.path.basename(__file__)` without `import os`): the same
modules are imported here. Exceptions keep TRex's names (`TRexError`, `ASTFError`, ...)
and are all `squall.errors.ProfileError`, so `except TRexError` catches profile errors.
"""

import base64  # noqa: F401 - re-exported for profiles
import collections  # noqa: F401
import hashlib  # noqa: F401
import inspect  # noqa: F401
import json  # noqa: F401
import os  # noqa: F401
import sys  # noqa: F401
import traceback  # noqa: F401

from ..astf import *  # noqa: F401,F403

from ..errors import ProfileError

TRexError = ProfileError
TRexArgumentError = ProfileError
TRexTypeError = ProfileError
TRexTimeoutError = ProfileError
ASTFErrorBadParamCombination = ProfileError
ASTFErrorMissingParam = ProfileError
ASTFErrorWrongType = ProfileError
ASTFErrorBadIp = ProfileError
ASTFErrorBadIpRange = ProfileError
ASTFErrorBadMac = ProfileError
ASTFErrorOverlapIP = ProfileError

