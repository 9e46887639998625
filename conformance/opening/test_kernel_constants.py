"""Every kernel constant the code copies equals the kernel's own definition.

The code calls a few system interfaces through ctypes with numbers copied from kernel and
libc headers (``impl/durable.py``: the network filesystems' ``statfs`` magic numbers,
``AT_FDCWD``, ``RENAME_NOREPLACE`` and where ``struct statfs`` keeps ``f_type``;
``impl/runner/supervise.py``: the ``prctl`` options), and two layouts copied from SQLite
(``impl/testing/sqlite_kernel.py``: ``struct sqlite3_vfs``; ``crashsim/equivalence.py``: the
WAL header's magic numbers). A mistyped value refuses nothing (a wrong magic number lets a
network filesystem through), so each is compared here with independent sources:

* the header text on this machine, where a header defining it is readable (parsed here, not
  imported from the code), and
* always, :data:`CITED`, a table kept here apart from the code's, giving each define's
  documented value and the kernel (or library) source file that defines it. Where no
  header on the machine defines a name, the test warns (:class:`HeaderUnavailable`, naming
  the headers it tried) and compares with :data:`CITED` alone; it never skips.

The ``struct statfs`` layout is also checked against the live kernel: a sentinel buffer shows
how much ``statfs`` writes, and ``filesystem_magic`` must report ``PROC_SUPER_MAGIC`` for
``/proc`` and what coreutils' ``stat -f`` reports for a directory of the test. A meta-test
lists every integer constant of each module under impl/ and crashsim/ that uses ctypes, so a
new one without a pin here fails.
"""

from __future__ import annotations

import ast
import ctypes
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from runstore import durable
from runstore.crashsim import equivalence
from runstore.runner import supervise
from runstore.testing import sqlite_kernel

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = Path("/usr/include")
MULTIARCH = sysconfig.get_config_var("MULTIARCH") or f"{platform.machine()}-linux-gnu"


class HeaderUnavailable(UserWarning):
    """No header on this machine defines the name: compared with the cited table only."""


@dataclass(frozen=True)
class Cited:
    value: int
    source: str  # where the kernel (or library) defines it
    headers: tuple[str, ...]  # installed copies to parse, under /usr/include ({arch}: multiarch)


MAGIC_H = ("linux/magic.h",)
UAPI_MAGIC = "include/uapi/linux/magic.h"
CIFS_SOURCE = f"{UAPI_MAGIC} since Linux 5.17; before, fs/cifs/cifsglob.h (now fs/smb/client/)"
# The kernel's documented values, typed from the kernel sources named (and statfs(2)).
CITED: dict[str, Cited] = {
    "NFS_SUPER_MAGIC": Cited(0x6969, UAPI_MAGIC, MAGIC_H),
    "SMB_SUPER_MAGIC": Cited(0x517B, UAPI_MAGIC, MAGIC_H),
    "CIFS_SUPER_MAGIC": Cited(0xFF534D42, CIFS_SOURCE, MAGIC_H),
    "SMB2_SUPER_MAGIC": Cited(0xFE534D42, CIFS_SOURCE, MAGIC_H),
    "AFS_SUPER_MAGIC": Cited(0x5346414F, UAPI_MAGIC, MAGIC_H),
    "AFS_FS_MAGIC": Cited(0x6B414653, UAPI_MAGIC, MAGIC_H),
    "CEPH_SUPER_MAGIC": Cited(0x00C36400, UAPI_MAGIC, MAGIC_H),
    "CODA_SUPER_MAGIC": Cited(0x73757245, UAPI_MAGIC, MAGIC_H),
    "NCP_SUPER_MAGIC": Cited(0x564C, UAPI_MAGIC, MAGIC_H),
    "V9FS_MAGIC": Cited(0x01021997, UAPI_MAGIC, MAGIC_H),
    "PROC_SUPER_MAGIC": Cited(0x9FA0, UAPI_MAGIC, MAGIC_H),
    "AT_FDCWD": Cited(
        -100, "include/uapi/linux/fcntl.h", ("linux/fcntl.h", "{arch}/bits/fcntl-linux.h")
    ),
    "RENAME_NOREPLACE": Cited(1 << 0, "include/uapi/linux/fs.h", ("linux/fs.h", "stdio.h")),
    "PR_SET_PDEATHSIG": Cited(1, "include/uapi/linux/prctl.h", ("linux/prctl.h",)),
    "PR_SET_CHILD_SUBREAPER": Cited(36, "include/uapi/linux/prctl.h", ("linux/prctl.h",)),
    "PR_GET_CHILD_SUBREAPER": Cited(37, "include/uapi/linux/prctl.h", ("linux/prctl.h",)),
}
# durable.NETWORK_FILESYSTEMS's names, each with the define its number is.
MAGIC_DEFINES = {
    "NFS": "NFS_SUPER_MAGIC",
    "SMB": "SMB_SUPER_MAGIC",
    "CIFS": "CIFS_SUPER_MAGIC",
    "SMB2": "SMB2_SUPER_MAGIC",
    "AFS": "AFS_SUPER_MAGIC",
    "kAFS": "AFS_FS_MAGIC",
    "Ceph": "CEPH_SUPER_MAGIC",
    "Coda": "CODA_SUPER_MAGIC",
    "NCP": "NCP_SUPER_MAGIC",
    "9P": "V9FS_MAGIC",
}
BY_NAME = {name: magic for magic, name in durable.NETWORK_FILESYSTEMS.items()}
# (where in the code, the code's value, the define it copies)
CODE: list[tuple[str, int, str]] = [
    ("durable._AT_FDCWD", durable._AT_FDCWD, "AT_FDCWD"),
    ("durable._RENAME_NOREPLACE", durable._RENAME_NOREPLACE, "RENAME_NOREPLACE"),
    ("supervise._PR_SET_PDEATHSIG", supervise._PR_SET_PDEATHSIG, "PR_SET_PDEATHSIG"),
    (
        "supervise._PR_SET_CHILD_SUBREAPER",
        supervise._PR_SET_CHILD_SUBREAPER,
        "PR_SET_CHILD_SUBREAPER",
    ),
    (
        "supervise._PR_GET_CHILD_SUBREAPER",
        supervise._PR_GET_CHILD_SUBREAPER,
        "PR_GET_CHILD_SUBREAPER",
    ),
    *(
        (f"durable.NETWORK_FILESYSTEMS[{name}]", BY_NAME.get(name, -1), define)
        for name, define in MAGIC_DEFINES.items()
    ),
]
# glibc's struct statfs (sysdeps/unix/sysv/linux/bits/statfs.h): f_type, a __fsword_t, is
# the first member; (sizeof(struct statfs), offsetof f_type, sizeof f_type) per machine.
STATFS_FIRST_MEMBER = ("__fsword_t", "f_type")
STATFS_LAYOUT = {"x86_64": (120, 0, 8), "aarch64": (120, 0, 8)}
# SQLite's sqlite3.h, struct sqlite3_vfs, members through version 3 (sqlite.org/c3ref/vfs.html).
SQLITE3_VFS_V3 = ("iVersion", "szOsFile", "mxPathname", "pNext", "zName", "pAppData")
SQLITE3_VFS_V3 += ("xOpen", "xDelete", "xAccess", "xFullPathname", "xDlOpen", "xDlError")
SQLITE3_VFS_V3 += ("xDlSym", "xDlClose", "xRandomness", "xSleep", "xCurrentTime")
SQLITE3_VFS_V3 += ("xGetLastError", "xCurrentTimeInt64", "xSetSystemCall", "xGetSystemCall")
SQLITE3_VFS_V3 += ("xNextSystemCall",)
SQLITE3_VFS_INTS = {"iVersion", "szOsFile", "mxPathname"}  # the rest are pointers
# SQLite's file format, "WAL File Format" (src/wal.c WAL_MAGIC): the header's magic is
# 0x377f0682, or 0x377f0683 when the checksums sum big-endian words.
WAL_MAGIC = {0x377F0682: "<", 0x377F0683: ">"}
# Every integer constant of a module that uses ctypes, with the test here that pins it.
PINNED = {
    "impl/durable.py": {"_AT_FDCWD", "_RENAME_NOREPLACE", "NETWORK_FILESYSTEMS"}
    | {"_STATFS_BUFFER_BYTES", "_F_TYPE_OFFSET"},
    "impl/runner/supervise.py": {
        "_PR_SET_PDEATHSIG",
        "_PR_SET_CHILD_SUBREAPER",
        "_PR_GET_CHILD_SUBREAPER",
    },
    "impl/testing/sqlite_kernel.py": set(),
}


def _integer(expression: str) -> int:
    """A define's value: an integer literal (C suffixes dropped), negated, shifted or or-ed."""
    text = re.sub(r"(?<=[0-9a-fA-F])[uUlL]+\b", "", expression.strip())

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift | ast.BitOr):
            left, right = value(node.left), value(node.right)
            return left << right if isinstance(node.op, ast.LShift) else left | right
        raise ValueError(f"not an integer define: {expression!r}")

    return value(ast.parse(text, mode="eval").body)


def header_define(define: str, headers: tuple[str, ...]) -> tuple[int, Path] | None:
    """The value ``#define``d for ``define`` in the first of ``headers`` that defines it."""
    pattern = re.compile(rf"^\s*#\s*define\s+{define}\s+([^\n]*?)\s*(?:/\*.*)?$", re.MULTILINE)
    for header in headers:
        path = INCLUDE / header.format(arch=MULTIARCH)
        if path.is_file() and (found := pattern.search(path.read_text(errors="replace"))):
            return _integer(found.group(1)), path
    return None


def kernel_value(define: str) -> int:
    """``define`` from this machine's headers, checked against :data:`CITED`; the cited
    value (with a :class:`HeaderUnavailable` warning) where no header defines it."""
    cited = CITED[define]
    found = header_define(define, cited.headers)
    if found is None:
        tried = ", ".join(str(INCLUDE / h.format(arch=MULTIARCH)) for h in cited.headers)
        message = f"{define}: no readable header defines it (tried {tried}); "
        warnings.warn(HeaderUnavailable(message + f"compared with {cited.source}"), stacklevel=2)
        return cited.value
    value, path = found
    assert value == cited.value, f"{path} defines {define} as {value:#x}: fix CITED"
    return value


@pytest.mark.parametrize(("where", "code", "define"), CODE, ids=[where for where, *_ in CODE])
def test_each_constant_is_the_kernels_definition(where: str, code: int, define: str) -> None:
    cited = CITED[define]
    assert code == cited.value, (
        f"{where} is {code:#x}, {cited.source} defines {define} as {cited.value:#x}"
    )
    assert code == kernel_value(define), f"{where} is {code:#x}, this machine's header disagrees"


def test_the_network_filesystems_are_exactly_the_cited_ones() -> None:
    """Each name the table refuses copies one define, and no number appears twice."""
    assert sorted(durable.NETWORK_FILESYSTEMS.values()) == sorted(MAGIC_DEFINES)
    assert len(set(durable.NETWORK_FILESYSTEMS)) == len(MAGIC_DEFINES)


def test_define_parsing_reads_what_the_headers_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parser itself: the spellings the headers use, and a name it must not match."""
    header = tmp_path / "x.h"
    header.write_text(
        "#define A_MAGIC\t\t0x6969\n# define B_FLAG (1 << 0)\t/* a comment\n continued */\n"
        "#define C_AT\t-100    /* Special value */\n#define D_LONG 0xFF534D42UL\n"
        "#define A_MAGIC_TOO 7\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(sys.modules[__name__], "INCLUDE", tmp_path)
    found = {
        name: header_define(name, ("x.h",)) for name in ("A_MAGIC", "B_FLAG", "C_AT", "D_LONG")
    }
    assert {name: pair and pair[0] for name, pair in found.items()} == {
        "A_MAGIC": 0x6969,
        "B_FLAG": 1,
        "C_AT": -100,
        "D_LONG": 0xFF534D42,
    }
    assert header_define("MISSING", ("x.h", "absent.h")) is None
    cited = dict(CITED)
    cited["X_ABSENT"] = Cited(5, "nowhere.c", ("absent.h",))
    monkeypatch.setattr(sys.modules[__name__], "CITED", cited)
    with pytest.warns(
        HeaderUnavailable, match=r"X_ABSENT: no readable header .*absent\.h.*nowhere\.c"
    ):
        assert kernel_value("X_ABSENT") == 5


def _statfs_layout(tmp_path: Path) -> tuple[int, int, int]:
    """(sizeof struct statfs, offsetof f_type, sizeof f_type): compiled against this
    machine's headers when a C compiler is there, else the cited table (with a warning)."""
    cited = STATFS_LAYOUT.get(platform.machine())
    assert cited is not None, f"no cited struct statfs layout for {platform.machine()}"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        warnings.warn(
            HeaderUnavailable("no C compiler to read sys/statfs.h: cited layout"), stacklevel=2
        )
        return cited
    program = tmp_path / "layout.c"
    program.write_text(
        "#include <stdio.h>\n#include <stddef.h>\n#include <sys/statfs.h>\n"
        'int main(void) { struct statfs s; printf("%zu %zu %zu", sizeof s,'
        " offsetof(struct statfs, f_type), sizeof s.f_type); return 0; }\n",
        encoding="utf-8",
    )
    built = subprocess.run(
        [compiler, str(program), "-o", str(tmp_path / "layout")], capture_output=True
    )
    if built.returncode != 0:
        why = built.stderr.decode(errors="replace").strip()[-300:]
        warnings.warn(
            HeaderUnavailable(f"sys/statfs.h did not compile ({why}): cited layout"), stacklevel=2
        )
        return cited
    done = subprocess.run([str(tmp_path / "layout")], capture_output=True, text=True, check=True)
    size, offset, width = (int(word) for word in done.stdout.split())
    assert (size, offset, width) == cited, (
        f"sys/statfs.h gives {(size, offset, width)}: fix STATFS_LAYOUT"
    )
    return size, offset, width


def test_f_type_is_the_first_member_of_struct_statfs() -> None:
    header = INCLUDE / MULTIARCH / "bits" / "statfs.h"
    if header.is_file():
        found = re.search(r"struct statfs\s*\{\s*(\w+)\s+(\w+)\s*;", header.read_text())
        assert found is not None and found.groups() == STATFS_FIRST_MEMBER, header
    else:
        warnings.warn(
            HeaderUnavailable(f"{header} is missing: cited glibc bits/statfs.h"), stacklevel=1
        )
    assert durable._F_TYPE_OFFSET == 0


def test_the_statfs_buffer_holds_the_struct_and_f_type_is_read_whole(tmp_path: Path) -> None:
    size, offset, width = _statfs_layout(tmp_path)
    assert size <= durable._STATFS_BUFFER_BYTES
    assert offset == durable._F_TYPE_OFFSET
    assert ctypes.sizeof(durable._F_TYPE) == width


def test_statfs_writes_inside_the_struct_on_this_kernel() -> None:
    """A sentinel-filled buffer: the call writes nothing past the cited struct size, and
    the word at f_type's offset is what ``filesystem_magic`` reports."""
    size = STATFS_LAYOUT[platform.machine()][0]
    sentinel = b"\xa5" * durable._STATFS_BUFFER_BYTES
    buffer = ctypes.create_string_buffer(sentinel, durable._STATFS_BUFFER_BYTES)
    assert durable._statfs is not None and durable._statfs(b"/", buffer) == 0
    written = max(i for i, byte in enumerate(buffer.raw) if byte != 0xA5) + 1
    assert written <= size
    f_type = ctypes.c_long.from_buffer(buffer, 0).value & 0xFFFFFFFF
    assert f_type == durable.filesystem_magic("/")


def test_filesystem_magic_reads_f_type_on_this_kernel(tmp_path: Path) -> None:
    assert durable.filesystem_magic("/proc") == kernel_value("PROC_SUPER_MAGIC")
    program = shutil.which("stat")
    if program is None:
        warnings.warn(HeaderUnavailable("no stat(1) to compare f_type with"), stacklevel=1)
        return
    done = subprocess.run(
        [program, "-f", "-c", "%t", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert durable.filesystem_magic(str(tmp_path)) == int(done.stdout, 16)


def _sqlite3_vfs_members() -> tuple[str, ...] | None:
    header = INCLUDE / "sqlite3.h"
    if not header.is_file():
        return None
    found = re.search(r"^struct sqlite3_vfs \{(.*?)^\};", header.read_text(), re.M | re.S)
    assert found is not None, f"{header} has no struct sqlite3_vfs"
    body = re.sub(r"/\*.*?\*/", "", found.group(1), flags=re.S)
    members = []
    for declaration in filter(None, (part.strip() for part in body.split(";"))):
        pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)", declaration)
        members.append(pointer.group(1) if pointer else re.findall(r"\w+", declaration)[-1])
    return tuple(members)


def test_the_sqlite3_vfs_layout_is_sqlite3_hs() -> None:
    members = _sqlite3_vfs_members()
    if members is None:
        warnings.warn(HeaderUnavailable("no /usr/include/sqlite3.h: cited members"), stacklevel=1)
    else:
        assert members[: len(SQLITE3_VFS_V3)] == SQLITE3_VFS_V3
    fields = sqlite_kernel._Vfs._fields_
    assert tuple(name for name, _ in fields) == SQLITE3_VFS_V3
    for name, kind in fields:
        expected = ctypes.c_int if name in SQLITE3_VFS_INTS else ctypes.c_void_p
        assert ctypes.sizeof(kind) == ctypes.sizeof(expected), name


def test_the_wal_magic_numbers_are_sqlites(tmp_path: Path) -> None:
    """The cited magic numbers, and the one this machine's SQLite writes (its checksums
    sum native words)."""
    assert equivalence._WAL_ORDER == WAL_MAGIC
    connection = sqlite3.connect(tmp_path / "db.sqlite3")
    try:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("CREATE TABLE t (x)")
        connection.commit()
        data = (tmp_path / "db.sqlite3-wal").read_bytes()
    finally:
        connection.close()
    magic = int.from_bytes(data[:4], "big")
    assert WAL_MAGIC.get(magic) == ("<" if sys.byteorder == "little" else ">"), hex(magic)
    assert not equivalence.wal_content(data).startswith((b"short:", b"no magic:", b"bad header:"))


def _integer_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound to an integer literal, or to a dict keyed by them."""

    def integral(node: ast.expr | None) -> bool:
        if isinstance(node, ast.UnaryOp):
            node = node.operand
        if isinstance(node, ast.BinOp):
            return integral(node.left) and integral(node.right)
        return isinstance(node, ast.Constant) and type(node.value) is int

    names = set()
    for statement in tree.body:
        target = statement.target if isinstance(statement, ast.AnnAssign) else None
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
        value = getattr(statement, "value", None)
        keyed = isinstance(value, ast.Dict) and any(integral(key) for key in value.keys)
        if isinstance(target, ast.Name) and (integral(value) or keyed):
            names.add(target.id)
    return names


def test_every_integer_constant_of_a_ctypes_module_is_pinned() -> None:
    found = {}
    for path in sorted([*(ROOT / "impl").rglob("*.py"), *(ROOT / "crashsim").rglob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in (
                node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
            )
        }
        if "ctypes" in imported:
            found[path.relative_to(ROOT).as_posix()] = _integer_constants(tree)
    assert found == PINNED, "pin each new constant here against its header"
