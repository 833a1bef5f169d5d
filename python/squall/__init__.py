"""Squall's Python front end.

`squall.astf` holds the TRex ASTF-compatible profile classes, `squall.compile` is the
profile compiler the `squall` binary runs (`python3 -m squall.compile PROFILE.py`),
`squall.Client` drives a running `squall daemon` (docs/API.md).
"""

__version__ = "0.1.0"

from .client import Client, ClientError, ProfileLoadError  # noqa: E402

__all__ = ["__version__", "Client", "ClientError", "ProfileLoadError"]
