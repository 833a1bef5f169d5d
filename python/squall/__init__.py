"""Squall's Python front end.

`squall.astf` holds the TRex ASTF-compatible profile classes, `squall.compile` is the
profile compiler the `squall` binary runs (`python3 -m squall.compile PROFILE.py`).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
