"""Shared helpers: repository paths, the IR schema validator, a minimal profile builder."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
EXAMPLES = os.path.join(REPO, "examples")
PCAPS = os.path.join(EXAMPLES, "pcaps")
SCHEMA = os.path.join(REPO, "schema", "profile-v1.schema.json")

sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def validate() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    with open(SCHEMA) as f:
        schema = json.load(f)
    v = jsonschema.Draft202012Validator(schema)

    def check(ir: Dict[str, Any]) -> None:
        errors = sorted(v.iter_errors(ir), key=lambda e: list(e.path))
        assert not errors, "; ".join(f"{list(e.path)}: {e.message[:200]}" for e in errors)

    return check
