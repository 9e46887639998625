"""SPEC.md stays true to the code: every error code is documented, and nothing else is."""

from __future__ import annotations

import re
from pathlib import Path

from runstore import errors

SPEC = Path(__file__).resolve().parents[2] / "SPEC.md"


def declared_codes() -> set[str]:
    return {
        value.code
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, errors.RunStoreError)
    }


def documented_codes() -> set[str]:
    text = SPEC.read_text(encoding="utf-8")
    section = text[text.index("## 9 Errors") : text.index("## 10 ")]
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))


def test_every_error_code_is_documented_and_no_other() -> None:
    assert declared_codes() == documented_codes()


def test_error_codes_are_unique() -> None:
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, errors.RunStoreError)
    ]
    assert len({cls.code for cls in classes}) == len(classes)
