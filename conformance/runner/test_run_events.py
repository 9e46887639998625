"""The payload rules of ``runstore run``'s events (SPEC.md section 15.7), written from the
text: a failure's stderr tail (its bounds, what is dropped, escaped control characters),
the ISO time beside ``time_ns``, and the log paths of an attempt artifact."""

from __future__ import annotations

import calendar
import os
import unicodedata

import pytest
from runstore.runner import run_events

SECOND = 10**9


def test_the_tail_keeps_the_last_five_non_blank_lines() -> None:
    data = "".join(f"line {index}\n\n" for index in range(9)).encode()
    assert run_events.stderr_tail(data) == tuple(f"line {index}" for index in range(4, 9))
    assert run_events.stderr_tail(b"") == ()
    assert run_events.stderr_tail(b"\n \n\t\n") == ()


def test_the_tail_is_at_most_500_characters_and_keeps_the_last_line_first() -> None:
    data = b"first\n" + b"x" * 700 + b"\nthe cause\n"
    tail = run_events.stderr_tail(data)
    assert tail[-1] == "the cause"
    assert sum(len(line) for line in tail) == 500
    assert tail[0].endswith("…") and set(tail[0][:-1]) == {"x"}
    assert "first" not in tail  # no room left for it
    (alone,) = run_events.stderr_tail(b"y" * 900)
    assert len(alone) == 500 and alone.endswith("…")


def test_the_tail_reads_only_the_last_4_kib_and_drops_the_line_cut_there() -> None:
    # A line that begins before the last 4 KiB is cut at that edge: it is left out.
    cut_line = b"BEGIN" + b"z" * 5000
    data = cut_line + b"\nlast words\n"
    assert run_events.stderr_tail(data) == ("last words",)
    # A single line longer than 4 KiB is all there is: its end is kept.
    (end,) = run_events.stderr_tail(b"q" * 10_000)
    assert set(end[:-1]) == {"q"} and "BEGIN" not in end


def test_control_and_format_characters_are_made_visible() -> None:
    raw = "red \x1b[31mtext\x07 tab\tcr\rrtl\u202eend\u2028sep"
    (line,) = run_events.stderr_tail(raw.encode())
    assert not any(unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp") for char in line)
    for escape in ("\\x1b[31m", "\\x07", "\\x09", "\\x0d", "\\u202e", "\\u2028"):
        assert escape in line
    assert run_events.stderr_tail(b"caf\xc3\xa9 \xff") == ("café \ufffd",)


def test_iso_time_is_utc_with_milliseconds_truncated() -> None:
    seconds = calendar.timegm((2026, 12, 6, 0, 12, 3, 0, 0, 0))
    assert run_events.iso_time(seconds * SECOND + 123_999_999) == "2026-12-06T00:12:03.123Z"
    assert run_events.iso_time(0) == "1970-01-01T00:00:00.000Z"
    assert run_events.stamp(5 * SECOND + 7) == {
        "time": "1970-01-01T00:00:05.000Z",
        "time_ns": 5 * SECOND + 7,
    }


def test_every_event_is_stamped_with_the_given_clock() -> None:
    seen: list[tuple[str, dict[str, object]]] = []
    ticks = iter([SECOND, 2 * SECOND])
    stamped = run_events.Stamped(lambda event, fields: seen.append((event, fields)), ticks.__next__)
    stamped("planned", {"ready": 1})
    stamped("summary", {"time_ns": -1})  # the clock's stamp wins over a field of that name
    assert seen == [
        ("planned", {"ready": 1, "time": "1970-01-01T00:00:01.000Z", "time_ns": SECOND}),
        ("summary", {"time": "1970-01-01T00:00:02.000Z", "time_ns": 2 * SECOND}),
    ]


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (("stdout.log", "stderr.log"), {"stdout", "stderr"}),
        ((), set()),
    ],
)
def test_log_paths_name_the_logs_the_artifact_holds(
    names: tuple[str, ...], expected: set[str]
) -> None:
    paths = run_events.log_paths("/store", "artifacts/attempt-ab", names)
    assert set(paths) == expected
    for key, path in paths.items():
        assert path == os.path.join("/store", "artifacts", "attempt-ab", f"{key}.log")
