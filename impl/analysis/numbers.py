"""Numbers for humans: significant digits, units, and a value with its spread (SPEC.md 17.4).

Rules of this file: pure functions from numbers to text; no unit scaling (1500 ms stays
"1500 ms"). Every rounding is Python's correctly rounded decimal formatting of the double
(``format(x, ".4g")``, ``format(x, ".2f")``, ``round(x, -q)``), so the text is reproducible.
Refuses a bool, a non-number, a non-finite value, a digit count outside 1..17 and a unit
that is not a string or holds a control character, with ``invalid_record``. Imports only the
error module and the shared control-character rule.
"""

from __future__ import annotations

import math
from typing import Final

from runstore.errors import InvalidRecordError
from runstore.validation import has_control

MAX_UNIT_LENGTH: Final = 64
"""Longest unit, in code points."""

_SCIENTIFIC_FROM: Final = 6
_SCIENTIFIC_BELOW: Final = -4
""":func:`plus_minus` writes a shared power of ten when the larger of ``|center|`` and
``spread`` is at least 1e6 or below 1e-4 (its decimal exponent ``>= 6`` or ``< -4``)."""


def _finite(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRecordError(f"{field} must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidRecordError(f"{field} is too large for a double") from None
    if not math.isfinite(number):
        raise InvalidRecordError(f"{field} must be finite, got {number!r}")
    return number


def check_unit(unit: object) -> str:
    """A unit: a string (``""`` for none) of at most :data:`MAX_UNIT_LENGTH` code points and
    no control characters. Refuses anything else with ``invalid_record``."""
    if type(unit) is not str:
        raise InvalidRecordError(f"unit must be a string, got {type(unit).__name__}")
    if len(unit) > MAX_UNIT_LENGTH or has_control(unit):
        raise InvalidRecordError(f"unit must be plain text of at most {MAX_UNIT_LENGTH} characters")
    return unit


def _unsigned_zero(text: str) -> str:
    """Drop the sign of a text that shows zero (``"-0"``, ``"-0.00"``)."""
    if text.startswith("-") and not text.strip("-0.e"):
        return text[1:]
    return text


def significant(value: float, digits: int = 4) -> str:
    """``value`` with at most ``digits`` significant digits and no trailing zeros:
    ``format(value, f".{digits}g")`` with the exponent written bare (``1.235e6``,
    ``1.2e-5``: no ``+``, no leading zeros), and ``"0"`` for -0.0. So 16.0 is ``"16"``,
    0.000123 is ``"0.000123"``, 1234567 is ``"1.235e6"``, 20000 is ``"20000"``: the exponent
    form appears when the rounded value's exponent is ``< -4`` or ``>= max(digits, 6)`` (an
    integer below a million is written in plain digits, its rounding kept: 12345 is
    ``"12340"``).
    """
    number = _finite(value, "value")
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 17:
        raise InvalidRecordError(f"digits must be an integer in 1..17, got {digits!r}")
    text = format(number, f".{digits}g")
    if "e" in text:
        mantissa, exponent = text.split("e")
        power = int(exponent)
        if 0 <= power < _SCIENTIFIC_FROM:
            # The rounded value is an integer below a million: its exact digits.
            text = format(float(text), ".0f")
        else:
            text = f"{mantissa}e{power}"
    return _unsigned_zero(text)


def with_unit(value: float, unit: str, digits: int = 4) -> str:
    """``significant(value, digits)``, a space and ``unit``; just the number when ``unit``
    is ``""``: ``"12.3 ms"``."""
    text = significant(value, digits)
    name = check_unit(unit)
    return f"{text} {name}" if name else text


def _last_digit(spread: float) -> int:
    """The decimal exponent ``q`` of the last digit shown of a spread ``> 0``: two
    significant digits when the spread rounded to two begins with 1 or 2, else one."""
    mantissa, exponent = format(spread, ".1e").split("e")
    if mantissa[0] in "12":
        return int(exponent) - 1
    return int(format(spread, ".0e").split("e")[1])


def _fixed(value: float, last: int) -> str:
    """``value`` rounded to the digit of ``10 ** last``, written without an exponent."""
    if last <= 0:
        return _unsigned_zero(format(value, f".{-last}f"))
    return _unsigned_zero(format(round(value, -last), ".0f"))


def _exponent(value: float) -> int:
    return int(format(value, "e").split("e")[1])


def _shift_point(value: float, places: int) -> float:
    """``value * 10 ** places`` in double arithmetic: multiplied (or divided) by the exact
    power of ten rounded to a double, in steps of at most 10 ** 300 so no factor overflows."""
    while places:
        step = max(-300, min(300, places))
        factor = float(10 ** abs(step))
        value = value * factor if step > 0 else value / factor
        places -= step
    return value


def plus_minus(center: float, spread: float, unit: str) -> str:
    """``"12.3 ± 0.4 ms"``: the spread with one or two significant digits
    (:func:`_last_digit`) and the center rounded to the same decimal position. A zero spread
    gives ``significant(center) ± 0``. When the larger of ``|center|`` and ``spread`` has a
    decimal exponent ``E >= 6`` or ``E < -4``, both are first scaled by ``10 ** -E``
    (:func:`_shift_point`) and the pair is written
    ``"(1.23 ± 0.04)e6 ms"``. Refuses a negative spread with ``invalid_record``.
    """
    middle = _finite(center, "center")
    width = _finite(spread, "spread")
    name = check_unit(unit)
    if width < 0:
        raise InvalidRecordError(f"spread must be >= 0, got {width!r}")
    suffix = f" {name}" if name else ""
    if width == 0.0:
        return f"{significant(middle)} ± 0{suffix}"
    power = _exponent(max(abs(middle), width))
    if _SCIENTIFIC_BELOW <= power < _SCIENTIFIC_FROM:
        last = _last_digit(width)
        return f"{_fixed(middle, last)} ± {_fixed(width, last)}{suffix}"
    middle, width = _shift_point(middle, -power), _shift_point(width, -power)
    last = _last_digit(width)
    return f"({_fixed(middle, last)} ± {_fixed(width, last)})e{power}{suffix}"


def bracketed(center: float, low: float, high: float, unit: str, *, signed: bool = False) -> str:
    """``"3.2 MB/s [1.1, 5.0]"``: an estimate and its interval, all three rounded to the
    decimal position :func:`plus_minus` would give the spread ``(high - low) / 2``
    (:func:`significant` each when that half width is 0 or the larger of ``|center|`` and it
    has a decimal exponent ``>= 6`` or ``< -4``). With ``signed``, a positive center gets a
    ``+``. Refuses what :func:`plus_minus` refuses, and ``low > high``.
    """
    middle, bottom, top = (
        _finite(v, f) for v, f in ((center, "center"), (low, "low"), (high, "high"))
    )
    name = check_unit(unit)
    if bottom > top:
        raise InvalidRecordError(f"low must be <= high, got {bottom!r} > {top!r}")
    half = top / 2 - bottom / 2  # cannot overflow
    if half == 0.0 or not _SCIENTIFIC_BELOW <= _exponent(max(abs(middle), half)) < _SCIENTIFIC_FROM:
        texts = [significant(value) for value in (middle, bottom, top)]
    else:
        last = _last_digit(half)
        texts = [_fixed(value, last) for value in (middle, bottom, top)]
    sign = "+" if signed and middle > 0 and texts[0].strip("0.") else ""
    suffix = f" {name}" if name else ""
    return f"{sign}{texts[0]}{suffix} [{texts[1]}, {texts[2]}]"
