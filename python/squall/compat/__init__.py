"""TRex import compatibility: `from trex.astf.api import *` inside a profile.

`trex_modules()` is a context manager that, while a profile is loaded and compiled,
makes `trex`, `trex.astf`, `trex.astf.api` (and the other module paths TRex profiles
import, listed in `ALIASES`) importable, backed by `squall.astf`. Nothing named `trex`
is installed: the entries live in `sys.modules` only inside the `with` block, and any
module that was there before is put back afterwards.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager
from typing import Dict, Iterator, Optional

from . import trex_api

# module path -> is it a package (has submodules)
ALIASES: Dict[str, bool] = {
    "trex": True,
    "trex.astf": True,
    "trex.astf.api": False,
    "trex.astf.trex_astf_profile": False,
    "trex.astf.trex_astf_global_info": False,
    "trex.astf.trex_astf_exceptions": False,
    "trex.common": True,
    "trex.common.trex_exceptions": False,
    # TRex before v2.50 shipped the ASTF API as trex_astf_lib
    "trex_astf_lib": True,
    "trex_astf_lib.api": False,
    "trex_astf_lib.trex_astf_profile": False,
    "trex_astf_lib.trex_astf_global_info": False,
    "trex_astf_lib.trex_astf_exceptions": False,
}


def _build() -> Dict[str, types.ModuleType]:
    public = {k: v for k, v in vars(trex_api).items() if not k.startswith("_")}
    mods: Dict[str, types.ModuleType] = {}
    for name, is_pkg in ALIASES.items():
        m = types.ModuleType(name, f"Squall stand-in for TRex's {name} (see squall.compat)")
        if is_pkg:
            m.__path__ = []
        else:
            m.__dict__.update(public)
        m.__dict__["__squall_compat__"] = True
        mods[name] = m
    for name, m in mods.items():  # parent.child attributes, as the import system sets them
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(mods[parent], child, m)
    return mods


@contextmanager
def trex_modules() -> Iterator[None]:
    """Provide the TRex module paths for the duration of the block."""
    saved: Dict[str, Optional[types.ModuleType]] = {n: sys.modules.get(n) for n in ALIASES}
    sys.modules.update(_build())
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
