"""The kit's report as a person reads it (SPEC.md section 18.4): the first differing byte
with both sides' windows, and a detail wrapped to a terminal's width (a transcript's long
lines cut with what is left out counted) or kept whole when the output is not a terminal.
"""

from __future__ import annotations

from runstore.kit.report import FAIL
from runstore.kit.report import Check
from runstore.kit.report import Report
from runstore.kit.report import first_difference


def test_the_first_difference_names_its_offset_sizes_and_both_windows() -> None:
    expected = b'{"a":1,"b":2,"c":3,"d":4}'
    got = b'{"a":1,"b":2,"d":4,"c":3}'
    assert first_difference(expected, got) == (
        "first difference at byte 14 (expected 25 bytes, got 25)\n"
        'expected ...b\',"b":2,"c":3,"d"\'...\n'
        '     got ...b\',"b":2,"d":4,"c"\'...'
    )


def test_a_shorter_side_differs_where_it_ends() -> None:
    assert first_difference(b"abcdef", b"abc").splitlines()[0] == (
        "first difference at byte 3 (expected 6 bytes, got 3)"
    )


REQUEST = "> " + '{"id": 9, "op": "projection", "args": {}, "padding": "' + "x" * 400 + '"}'


def failed_check() -> Check:
    words = " ".join(f"word{n}" for n in range(40))
    return Check("writer lockstep", status=FAIL, cases=3, detail=f"{words}\n{REQUEST}")


def test_a_terminal_row_wraps_the_detail_and_cuts_a_long_transcript_line() -> None:
    row = Report("impl", "writer").row(failed_check(), width=80)
    lines = row.splitlines()
    assert lines[0].split() == ["writer", "lockstep", "FAIL", "3", "cases"]
    *text, cut = lines
    assert all(len(line) <= 80 for line in text), [len(line) for line in text]
    assert len(cut) <= 2 * 80  # a transcript line is cut to two screen lines
    assert lines[1].startswith("      word0 ") and lines[2].startswith("        word")
    assert cut.startswith("      > {") and cut.endswith(" more characters)")
    shown = len(cut) - len("      ") - len(cut[cut.rindex(" ... (") :])
    assert cut.endswith(f" ... ({len(REQUEST) - shown} more characters)")


def test_a_row_for_a_pipe_keeps_every_detail_line_whole() -> None:
    row = Report("impl", "writer").row(failed_check())
    assert row.splitlines()[1:] == ["      " + line for line in failed_check().detail.splitlines()]
