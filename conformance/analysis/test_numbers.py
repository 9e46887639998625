"""Numbers for humans (SPEC.md section 17.4): the rules read back from the text, the
examples the section gives, and every refusal."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from runstore.analysis.numbers import bracketed
from runstore.analysis.numbers import plus_minus
from runstore.analysis.numbers import significant
from runstore.analysis.numbers import with_unit
from runstore.errors import InvalidRecordError

finite = st.floats(allow_nan=False, allow_infinity=False)
NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?(e-?[1-9][0-9]*)?")
"""What :func:`significant` writes: no ``+``, no trailing zeros, no exponent zeros."""


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.000123, "0.000123"),
        (1234567, "1.235e6"),
        (16.0, "16"),
        (-0.0, "0"),
        (0.0, "0"),
        (1.2e-5, "1.2e-5"),
        (20000, "20000"),
        (12345, "12340"),
        (-654321, "-654300"),
        (999999.9, "1e6"),
    ],
)
def test_the_sections_examples(value: float, text: str) -> None:
    assert significant(value) == text


@settings(max_examples=300)
@given(value=finite, digits=st.integers(1, 17))
def test_significant_rounds_to_the_digits_and_writes_no_noise(value: float, digits: int) -> None:
    text = significant(value, digits)
    assert NUMBER.fullmatch(text), text
    # The same decimal number as printf's %g with that precision.
    assert float(text) == float(f"{value:.{digits}g}")
    mantissa = text.split("e")[0].lstrip("-").replace(".", "").lstrip("0")
    if "." not in text and "e" not in text:
        mantissa = mantissa.rstrip("0")  # an integer's trailing zeros hold places
    assert len(mantissa) <= digits
    if value != 0 and math.isfinite(float(text)):  # 1.5e308 to one digit is 2e308
        exponent = int(f"{abs(float(text)):e}".split("e")[1])
        assert ("e" in text) == (exponent < -4 or exponent >= max(digits, 6))


@settings(max_examples=100)
@given(value=finite)
def test_seventeen_digits_round_trip(value: float) -> None:
    assert float(significant(value, 17)) == value or value == 0


def test_with_unit_puts_one_space_before_a_unit_and_none_without() -> None:
    assert with_unit(12.3, "ms") == "12.3 ms"
    assert with_unit(12.3, "") == "12.3"
    assert with_unit(1500, "ms") == "1500 ms"  # no unit scaling


PLAIN = re.compile(r"(-?[0-9]+(?:\.([0-9]+))?) ± ([0-9]+(?:\.([0-9]+))?)( .+)?")
SCALED = re.compile(r"\((-?[0-9.]+) ± ([0-9.]+)\)e(-?[0-9]+)( .+)?")


def test_plus_minus_examples() -> None:
    assert plus_minus(12.34, 0.4, "ms") == "12.3 ± 0.4 ms"
    assert plus_minus(12.34, 0.0, "ms") == "12.34 ± 0 ms"


@settings(max_examples=300)
@given(
    center=st.floats(-9e5, 9e5, allow_nan=False),
    spread=st.floats(1e-4, 9e5, allow_nan=False),
    unit=st.sampled_from(["", "ms", "MB/s"]),
)
def test_plus_minus_shows_the_spread_with_one_or_two_digits_and_the_center_alike(
    center: float, spread: float, unit: str
) -> None:
    text = plus_minus(center, spread, unit)
    if max(abs(center), spread) < 1e-4:
        return  # the scaled form, checked below
    match = PLAIN.fullmatch(text)
    assert match, text
    center_text, center_decimals, spread_text, spread_decimals, suffix = match.groups()
    assert (suffix or "") == (f" {unit}" if unit else "")
    assert len(center_decimals or "") == len(spread_decimals or "")
    decimals = len(spread_decimals or "")
    digits = spread_text.replace(".", "").lstrip("0")
    # Trailing zeros are place-holders when the last digit is left of the point.
    significant_digits = digits.rstrip("0") if decimals == 0 else digits
    assert 1 <= len(significant_digits) <= 2
    if len(significant_digits) == 2:
        assert significant_digits[0] in "12"
    last = 10.0**-decimals if decimals else 10.0 ** (len(digits) - len(significant_digits))
    assert abs(float(spread_text) - spread) <= last / 2 * (1 + 1e-9)
    assert abs(float(center_text) - center) <= last / 2 * (1 + 1e-9) + 1e-9 * abs(center)


@settings(max_examples=100)
@given(
    mantissa=st.floats(1, 9.99),
    power=st.sampled_from([-12, -9, -5, 6, 9, 15]),
    relative=st.floats(1e-3, 0.5),
)
def test_very_large_or_small_pairs_share_a_power_of_ten(
    mantissa: float, power: int, relative: float
) -> None:
    center = mantissa * 10.0**power
    text = plus_minus(center, relative * center, "s")
    match = SCALED.fullmatch(text)
    assert match, text
    center_text, spread_text, exponent, suffix = match.groups()
    assert suffix == " s"
    scale = 10.0 ** int(exponent)
    assert float(center_text) * scale == pytest.approx(center, rel=0.3)
    assert float(spread_text) * scale == pytest.approx(relative * center, rel=0.6)


@pytest.mark.parametrize(
    ("center", "spread", "exponent"), [(5e-324, 5e-324, -324), (1.7e308, 1e307, 308)]
)
def test_the_extreme_doubles_scale_without_overflow(
    center: float, spread: float, exponent: int
) -> None:
    """10 ** 324 is no double: the scaling goes in steps (SPEC 17.4)."""
    match = SCALED.fullmatch(plus_minus(center, spread, "s"))
    assert match and int(match.group(3)) == exponent


def test_bracketed_rounds_the_three_to_the_half_width() -> None:
    """Half width 1.95: two digits (it begins with 1), so one decimal."""
    assert bracketed(3.21, 1.14, 5.04, "MB/s", signed=True) == "+3.2 MB/s [1.1, 5.0]"
    assert bracketed(-3.21, -5.04, -1.14, "") == "-3.2 [-5.0, -1.1]"


# --- refusals --------------------------------------------------------------------------------

BAD_NUMBERS = [math.nan, math.inf, -math.inf, True, "1", None, [1.0], 10**400]


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
def test_bad_numbers_are_refused_everywhere(value: object) -> None:
    calls: list[Callable[[], str]] = [
        lambda: significant(value),  # type: ignore[arg-type]
        lambda: with_unit(value, "ms"),  # type: ignore[arg-type]
        lambda: plus_minus(value, 1.0, "ms"),  # type: ignore[arg-type]
        lambda: plus_minus(1.0, value, "ms"),  # type: ignore[arg-type]
        lambda: bracketed(value, 0.0, 1.0, "ms"),  # type: ignore[arg-type]
        lambda: bracketed(0.0, value, 1.0, "ms"),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidRecordError) as raised:
            call()
        assert raised.value.code == "invalid_record"


@pytest.mark.parametrize("digits", [0, 18, -1, True, 2.0, "4", None], ids=repr)
def test_bad_digit_counts_are_refused(digits: object) -> None:
    with pytest.raises(InvalidRecordError, match="digits"):
        significant(1.0, digits)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="digits"):
        with_unit(1.0, "ms", digits)  # type: ignore[arg-type]


@pytest.mark.parametrize("unit", [None, 5, b"ms", "m\ns", "\x7f", "x" * 65], ids=repr)
def test_bad_units_are_refused(unit: object) -> None:
    calls: list[Callable[[], str]] = [
        lambda: with_unit(1.0, unit),  # type: ignore[arg-type]
        lambda: plus_minus(1.0, 0.1, unit),  # type: ignore[arg-type]
        lambda: bracketed(1.0, 0.0, 2.0, unit),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidRecordError, match="unit"):
            call()


def test_a_negative_spread_and_a_reversed_interval_are_refused() -> None:
    with pytest.raises(InvalidRecordError, match="spread"):
        plus_minus(1.0, -0.1, "ms")
    with pytest.raises(InvalidRecordError, match="low"):
        bracketed(1.0, 2.0, 0.5, "ms")
