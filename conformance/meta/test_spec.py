"""SPEC.md stays true to the code: every error code is documented, and nothing else is; its
sections are numbered in order; and every citation of SPEC in the source and the tests
names a passage that exists where it says.

A citation (whitespace between the parts may include a line break, and the ``#`` that
continues a comment on the next line)::

    citation  = [ "SPEC.md" | "SPEC" ] place locator
    place     = ( "section" | "sections" | "§" ) NUMBER [ "step" STEP ]
    locator   = "," NAME { "and" NAME }          names, e.g.  SPEC.md section N, "X"
              | "(" NAME { "and" NAME } ")"      names, e.g.  SPEC.md section N ("X" and "Y")
              | ":" QUOTE                        a quotation, e.g.  SPEC.md section N: "..."
    reference = ( "SPEC.md" | "SPEC" ) [ "section" | "sections" | "§" ] NUMBER
                                                 a section alone, e.g.  SPEC.md 15.6
    unplaced  = ( "SPEC.md" | "SPEC" ) [ "," ] NAME      a name without a section: refused

NUMBER is ``15`` or ``15.4``; a citation may leave out ``SPEC`` (a bare ``section N, "X"``),
since in these files a section number with a name or a quotation is always SPEC's. A
reference resolves when SPEC has section NUMBER. A NAME resolves when, inside section NUMBER
(its subsections included), it is the text of a heading (without its number, with or
without a trailing parenthetical) or of a bold lead: ``**X**`` or ``**X.**`` opening a
paragraph or a list item. A QUOTE resolves when its text, split at ``...``, occurs in that
order in the section (in list item STEP with ``step``). Backticks, bold marks and line
breaks are ignored on both sides. SPEC.md's own cross references (``section 6, "Claims"``)
are checked the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import gen_spec
import pytest
from runstore import errors

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "SPEC.md"
CITING_FOLDERS = ("impl", "model", "crashsim", "tools", "conformance")
CITING_SCRIPTS = ("tools/regen", "tools/nightly", "tools/check")


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


# --- numbering ------------------------------------------------------------------------------


def test_sections_and_subsections_are_numbered_in_order() -> None:
    numbered = [
        (h.level, h.text.split(" ", 1)[0])
        for h in gen_spec.headings(SPEC.read_text(encoding="utf-8"))
        if h.level in (2, 3)
    ]
    sections = [number for level, number in numbered if level == 2]
    assert sections == [str(n) for n in range(1, len(sections) + 1)]
    current, expected = "", 1
    for level, number in numbered:
        if level == 2:
            current, expected = number, 1
            continue
        assert number == f"{current}.{expected}", f"### {number} under ## {current}"
        expected += 1


# --- citations ------------------------------------------------------------------------------

NAME = r'"[^"]+"'
PLACE = (
    r"(?:\bSPEC(?:\.md)?\s+)?(?:\bsections?\s+|§\s*)(?P<section>\d+(?:\.\d+)*)"
    r"(?:\s+step\s+(?P<step>\w+))?"
)
CITATION = re.compile(
    PLACE + rf"(?:(?:,\s*|\s*\(\s*)(?P<names>{NAME}(?:\s+and\s+{NAME})*)|:\s*(?P<quote>{NAME}))"
)
UNPLACED = re.compile(rf"\bSPEC(?:\.md)?(?:,\s*|\s+)(?P<names>{NAME})")
REFERENCE = re.compile(r"\bSPEC(?:\.md)?\s+(?:sections?\s+|§\s*)?(?P<section>\d+(?:\.\d+)*)")
COMMENT_MARK = re.compile(r"^([ \t]*)#", flags=re.MULTILINE)
LIST_ITEM = re.compile(r"^( *)(?:(\d+)\.|[-*+]) +")
BOLD_LEAD = re.compile(r"^ *(?:(?:\d+\.|[-*+]) +)?\*\*(?P<lead>[^*]+?)\*\*")


@attrs.frozen
class Citation:
    """One citation of SPEC: where it is, the section it names (None when it names none),
    and the names or the quotation it gives (neither for a reference to the section)."""

    where: str
    section: str | None
    names: tuple[str, ...] = ()
    quote: str | None = None
    step: str | None = None


def plain(text: str) -> str:
    """``text`` without backticks and bold marks, its whitespace runs one space."""
    return " ".join(text.replace("`", "").replace("**", "").split())


def citations(text: str, where: str, *, markdown: bool = False) -> list[Citation]:
    """Every citation in ``text`` (a source file's, or with ``markdown`` SPEC's own), each
    placed at ``where:<line>``."""
    if not markdown:  # a comment continued on the next line: its '#' is whitespace
        text = COMMENT_MARK.sub(lambda m: m.group(1) + " ", text)
    found: list[tuple[int, Citation]] = []
    for matched in CITATION.finditer(text):
        at = f"{where}:{text.count(chr(10), 0, matched.start()) + 1}"
        names = tuple(plain(name[1:-1]) for name in re.findall(NAME, matched["names"] or ""))
        quote = plain(matched["quote"].strip('"')) if matched["quote"] else None
        cited = Citation(at, matched["section"], names, quote, matched["step"])
        found.append((matched.start(), cited))
    cited_at = {start for start, _ in found}
    for matched in REFERENCE.finditer(text):
        if matched.start() not in cited_at:
            at = f"{where}:{text.count(chr(10), 0, matched.start()) + 1}"
            found.append((matched.start(), Citation(at, matched["section"])))
    for matched in UNPLACED.finditer(text):
        at = f"{where}:{text.count(chr(10), 0, matched.start()) + 1}"
        found.append((matched.start(), Citation(at, None, (plain(matched["names"][1:-1]),))))
    return [cited for _, cited in sorted(found, key=lambda pair: pair[0])]


def section_lines(spec: str, number: str) -> list[str] | None:
    """The lines of section ``number`` (its heading up to the next heading of its level or
    above), or None when SPEC has no such section."""
    lines = spec.split("\n")
    found = gen_spec.headings(spec)
    for index, heading in enumerate(found):
        if heading.level in (2, 3) and heading.text.split(" ", 1)[0] == number:
            after = [h.line for h in found[index + 1 :] if h.level <= heading.level]
            return lines[heading.line : after[0] if after else len(lines)]
    return None


def names_in(spec: str, lines: list[str]) -> set[str]:
    """The headings' texts (without their numbers, with and without a trailing
    parenthetical) and the bold leads of paragraphs and list items among ``lines``."""
    names: set[str] = set()
    for heading in gen_spec.headings("\n".join(lines)):
        title = plain(re.sub(r"^\d+(?:\.\d+)* ", "", heading.text))
        names |= {title, re.sub(r" \([^()]*\)$", "", title)}
    fenced = False
    for index, line in enumerate(lines):
        if gen_spec.FENCE.match(line):
            fenced = not fenced
        previous = lines[index - 1] if index else ""
        opens = index == 0 or not previous.strip() or previous.startswith("#")
        matched = None if fenced else BOLD_LEAD.match(line)
        if matched and (opens or LIST_ITEM.match(line)):
            names.add(plain(matched["lead"]).rstrip(".:").rstrip())
    return names


def list_item(lines: list[str], step: str) -> list[str]:
    """The lines of every list item numbered ``step``: from its marker to the next nonblank
    line indented no deeper than the marker."""
    items: list[str] = []
    for index, line in enumerate(lines):
        marker = LIST_ITEM.match(line)
        if marker is None or marker.group(2) != step:
            continue
        depth = len(marker.group(1))
        items.append(line)
        for later in lines[index + 1 :]:
            if later.strip() and len(later) - len(later.lstrip(" ")) <= depth:
                break
            items.append(later)
    return items


def dangling(cited: Citation, spec: str) -> list[str]:
    """What ``cited`` names that SPEC does not hold where it says (empty when it resolves)."""
    if cited.section is None:
        return [f"{cited.where}: names {cited.names} without a section number"]
    lines = section_lines(spec, cited.section)
    if lines is None:
        return [f"{cited.where}: SPEC has no section {cited.section}"]
    missing = [
        f'{cited.where}: section {cited.section} has no heading or bold lead "{name}"'
        for name in cited.names
        if name not in names_in(spec, lines)
    ]
    if cited.quote is not None:
        scope = list_item(lines, cited.step) if cited.step else lines
        text, at = plain("\n".join(scope)), 0
        for piece in re.split(r"\.\.\.|…", cited.quote):
            found = text.find(piece.strip(), at)
            if found < 0:
                place = f"{cited.section} step {cited.step}" if cited.step else cited.section
                missing.append(f'{cited.where}: section {place} does not say "{piece.strip()}"')
                break
            at = found + len(piece.strip())
    return missing


def citing_files() -> list[Path]:
    files = [ROOT / name for name in CITING_SCRIPTS]
    for folder in CITING_FOLDERS:
        files += sorted((ROOT / folder).rglob("*.py"))
    return [path for path in files if path.is_file() and "__pycache__" not in path.parts]


def repository_citations() -> list[Citation]:
    found = [
        cited
        for path in citing_files()
        for cited in citations(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    return found + citations(SPEC.read_text(encoding="utf-8"), "SPEC.md", markdown=True)


CITATIONS = repository_citations()


def test_the_source_cites_spec() -> None:
    assert any(cited.names for cited in CITATIONS)
    assert any(cited.quote for cited in CITATIONS)


@pytest.mark.parametrize("cited", CITATIONS, ids=[cited.where for cited in CITATIONS])
def test_every_citation_names_a_passage_spec_has(cited: Citation) -> None:
    assert dangling(cited, SPEC.read_text(encoding="utf-8")) == []


# A SPEC in miniature for the grammar. The cases spell SPEC's name CITE, "section" SECTION
# and "§" PARAGRAPH, so that they are not citations of the real SPEC themselves.
TINY_SPEC = """\
# t

## 1 First

**Lead.** A sentence quoted here. More text after it.

Mid paragraph **not a lead** in it.

```
**Fenced.** Not a lead.
```

### 1.1 Sub part (qualified)

1. **Step lead.** One
   continued.
2. Two, with a quoted phrase
   that wraps.

## 2 Second

**Elsewhere.** Text.
"""


def spelled(case: str) -> str:
    return case.replace("CITE", "SPEC").replace("SECTION", "section").replace("PARAGRAPH", "§")


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ('(CITE SECTION 1, "Lead")', None),
        ('CITE.md SECTION 1, "Sub part"', None),
        ('CITE SECTION 1, "Sub part (qualified)"', None),
        ('CITE PARAGRAPH1.1, "Step\n    lead"', None),
        ('# comment (CITE SECTION 1 ("Lead" and\n# "Step lead"))', None),
        ('cites SECTION 1: "quoted here. More text"', None),
        ('CITE SECTION 1: "A sentence ... after it"', None),
        ('CITE SECTION 1.1 step 2: "quoted phrase that wraps"', None),
        ('CITE SECTION 1, "Elsewhere"', 'section 1 has no heading or bold lead "Elsewhere"'),
        ('CITE SECTION 1, "not a lead"', 'no heading or bold lead "not a lead"'),
        ('CITE SECTION 1, "Fenced"', 'no heading or bold lead "Fenced"'),
        ('CITE SECTION 1 ("Lead" and "Gone")', 'no heading or bold lead "Gone"'),
        ('CITE SECTION 3, "Lead"', "SPEC has no section 3"),
        ('CITE SECTION 1.2, "Lead"', "SPEC has no section 1.2"),
        ('CITE, "Lead"', "without a section number"),
        ('CITE.md "Lead"', "without a section number"),
        ('CITE SECTION 1: "not said"', 'section 1 does not say "not said"'),
        ('CITE SECTION 1: "A sentence ... before it"', 'does not say "before it"'),
        ('CITE SECTION 1.1 step 1: "quoted phrase"', 'section 1.1 step 1 does not say "quoted'),
        ("CITE.md SECTION 1.1.", None),
        ("(CITE 2)", None),
        ("CITE.md PARAGRAPH2.1", "SPEC has no section 2.1"),
        ("CITE.md SECTIONs 3 and 4", "SPEC has no section 3"),
    ],
)
def test_a_citation_resolves_only_to_what_its_section_holds(source: str, says: str | None) -> None:
    (cited,) = citations(spelled(source), "case")
    problems = dangling(cited, TINY_SPEC)
    if says is None:
        assert problems == []
    else:
        assert len(problems) == 1 and says in problems[0], problems


@pytest.mark.parametrize(
    "source",
    ['Path("x") / "CITE.md", "other"', 'help="the CITE.md to process"', 'section 14\'s, not "x"'],
)
def test_what_is_not_a_citation_is_not_read_as_one(source: str) -> None:
    assert citations(spelled(source), "case") == []
