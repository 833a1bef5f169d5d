"""Profile errors that point at the user's Python line.

Every object a profile builds records where the user created it (`Site`), so an error
found later (at compile time) still names the file and line of the call that caused it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import FrameType
from typing import Optional

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True)
class Site:
    """A place in the user's Python code: file and line."""

    filename: str
    lineno: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


def _is_internal(frame: FrameType) -> bool:
    fn = frame.f_code.co_filename
    if fn.startswith("<frozen importlib"):
        return True
    return os.path.abspath(fn).startswith(_PKG_DIR)


def user_site() -> Optional[Site]:
    """The innermost stack frame outside the squall package (the user's call)."""
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None and _is_internal(frame):
        frame = frame.f_back
    if frame is None:
        return None
    return Site(frame.f_code.co_filename, frame.f_lineno)


class ProfileError(Exception):
    """An error in a profile. `str(err)` is `FILE:LINE: MESSAGE` when the line is known.

    Attributes: `msg` (the message), `site` (a `Site` or None), `field` (the parameter or
    tunable the error is about, e.g. `tcp.mss`, or None).
    """

    def __init__(self, msg: str, site: Optional[Site] = None, field: Optional[str] = None) -> None:
        self.msg = str(msg)
        self.site = site if site is not None else user_site()
        self.field = field
        super().__init__(str(self))

    @property
    def filename(self) -> Optional[str]:
        return self.site.filename if self.site else None

    @property
    def lineno(self) -> Optional[int]:
        return self.site.lineno if self.site else None

    def brief(self) -> str:
        """The message without the location (TRex's `ASTFError.brief()`)."""
        return self.msg

    def __str__(self) -> str:
        if self.site is None:
            return self.msg
        return f"{self.site}: {self.msg}"
