"""Load a Python profile file and call its `register().get_profile(...)`.

TRex conventions are followed: the profile's folder is on `sys.path` while it loads,
capture paths are relative to it, `from trex.astf.api import *` works (see
`squall.compat`), and tunables reach `get_profile` the way TRex passes them:

* `get_profile(self, tunables, **kwargs)`: `tunables` is an argv-style list
  (`-t size=10` becomes `["--size", "10"]`) for the profile's own argparse;
* `get_profile(self, **kwargs)` (older style): each tunable is a keyword argument, its
  value converted to int or float when it looks like one (and `tunables` is passed too);
* `get_profile(self, size=1)`: named parameters receive the matching tunables;
* `get_profile(self)`: no tunables may be given.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from .astf.capture import set_profile_dir
from .astf.profile import ASTFProfile
from .compat import trex_modules
from .errors import ProfileError, Site

_counter = itertools.count()


def convert_value(v: str) -> Union[int, float, str]:
    """'10' -> 10, '0x10' -> 16, '1.5' -> 1.5, anything else unchanged."""
    try:
        return int(v, 0)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def tunables_argv(tunables: Mapping[str, str], extra: Sequence[str] = ()) -> List[str]:
    """`{"size": "10"}` -> `["--size", "10"]` (TRex's conversion), then `extra` verbatim."""
    argv: List[str] = []
    for k, v in tunables.items():
        argv += [f"--{k}", v]
    return argv + list(extra)


def _call_get_profile(get_profile: Any, tunables: Mapping[str, str], extra: Sequence[str],
                      site: Optional[Site]) -> Any:
    try:
        sig = inspect.signature(get_profile)
    except (TypeError, ValueError):
        return get_profile()
    params = sig.parameters
    has_var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs: Dict[str, Any] = {}
    argv = tunables_argv(tunables, extra)
    if "tunables" in params or has_var_kw:
        kwargs["tunables"] = argv
    for k, v in tunables.items():
        if k == "tunables":
            continue
        if k in params or has_var_kw:
            kwargs[k] = convert_value(v)
        elif "tunables" not in params:
            accepted = [n for n in params if n != "tunables"]
            raise ProfileError(f"get_profile() does not take tunable {k!r} (it accepts: "
                               f"{', '.join(accepted) or 'no tunables'})", site, k)
    if extra and "tunables" not in params and not has_var_kw:
        raise ProfileError("get_profile() takes no `tunables` list for the extra arguments", site)
    return get_profile(**kwargs)


def load_profile(path: str, tunables: Optional[Mapping[str, str]] = None,
                 extra: Sequence[str] = ()) -> ASTFProfile:
    """Load the profile file at `path` and return its `ASTFProfile` (compile it with
    `to_json()` before leaving `profile_context`, or use `compile_profile`)."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(path)
    name = f"squall_profile_{next(_counter)}_{os.path.splitext(os.path.basename(path))[0]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProfileError(f"{path}: cannot be loaded as a Python module", None)
    module = importlib.util.module_from_spec(spec)
    file_site = Site(path, 1)
    sys.path.insert(0, folder)
    set_profile_dir(folder)
    try:
        sys.modules[name] = module
        spec.loader.exec_module(module)
        register = getattr(module, "register", None)
        if not callable(register):
            raise ProfileError("the profile defines no register() function", file_site, "register")
        obj = register()
        get_profile = getattr(obj, "get_profile", None)
        if not callable(get_profile):
            raise ProfileError(f"register() returned {type(obj).__name__!s}, which has no get_profile()",
                               _def_site(register) or file_site, "get_profile")
        profile = _call_get_profile(get_profile, dict(tunables or {}), extra,
                                    _def_site(get_profile) or file_site)
        if not isinstance(profile, ASTFProfile):
            raise ProfileError(f"get_profile() returned {type(profile).__name__}, not an ASTFProfile",
                               _def_site(get_profile) or file_site, "get_profile")
        profile.meta.setdefault("source", os.path.basename(path))
        if tunables:
            profile.meta.setdefault("tunables", dict(tunables))
        return profile
    finally:
        sys.modules.pop(name, None)
        set_profile_dir(None)
        try:
            sys.path.remove(folder)
        except ValueError:
            pass


def compile_profile(path: str, tunables: Optional[Mapping[str, str]] = None,
                    extra: Sequence[str] = ()) -> Dict[str, Any]:
    """Load the profile at `path` with the TRex import paths available and compile it to
    the JSON IR dict."""
    with trex_modules():
        prof = load_profile(path, tunables, extra)
        folder = os.path.dirname(os.path.abspath(path))
        set_profile_dir(folder)
        try:
            return prof.to_json()
        finally:
            set_profile_dir(None)


def _def_site(fn: Any) -> Optional[Site]:
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__func__", None), "__code__", None)
    if code is None:
        return None
    return Site(code.co_filename, code.co_firstlineno)
