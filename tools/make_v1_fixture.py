"""Make the committed schema-v1 store fixture (conformance/fixtures/store-v1.tar.gz).

How it was made, so a reviewer can repeat it: a two-slot campaign (one candidate, two
problems; the worker writes ``result.json`` ``{"metrics": {"size": N}}``) is run by the
installed ``runstore`` console script into a new store (``runstore run campaign.toml
--store DIR --init``); the process exits, so SQLite's last connection checkpoints the WAL
and removes it; then the store root (the database, its lock files and ``artifacts/``) and
the campaign directory are packed into one gzipped tar with normalized metadata (sorted
entries, fixed times, no owners).

Not part of ``tools/regen`` on purpose: the fixture is a record of what a store made with
schema v1 holds, and ``conformance/schema/test_freeze.py`` requires the current code to
open and check it as committed. Rebuilding it after a schema change would only hide the
change; a change of the schema is a new ``user_version`` with a migration from v1, tested
on this file.
"""

from __future__ import annotations

import argparse
import gzip
import io
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = ROOT / "conformance" / "fixtures" / "store-v1.tar.gz"
RUNSTORE = str(Path(sys.executable).with_name("runstore"))
STORE = "store"
CAMPAIGN = "campaign"
MTIME = 1_700_000_000
"""Every archive member's modification time (2023-11-14), so the tar's metadata says
nothing about when it was rebuilt."""

WORKER = textwrap.dedent(
    """\
    import json, os
    size = json.loads(os.environ["RUNSTORE_PARAMETERS"])["size"]
    path = os.path.join(os.environ["RUNSTORE_OUTPUT_DIR"], "result.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"metrics": {"size": size}}, handle)
    """
)

CAMPAIGN_TOML = textwrap.dedent(
    """\
    [campaign]
    name = "frozen"
    timeout_seconds = 60
    lease_seconds = 30

    [[candidates]]
    name = "writer"
    command = ["{python}", "worker.py"]
    files = ["worker.py"]

    [[problems]]
    name = "small"
    parameters = { size = 1 }

    [[problems]]
    name = "large"
    parameters = { size = 2 }
    """
)


def build(directory: Path) -> Path:
    """Write the campaign under ``directory/campaign`` and run it into a new store at
    ``directory/store``; returns the store root."""
    campaign = directory / CAMPAIGN
    campaign.mkdir()
    (campaign / "worker.py").write_text(WORKER, encoding="utf-8")
    (campaign / "campaign.toml").write_text(CAMPAIGN_TOML, encoding="utf-8")
    store = directory / STORE
    done = subprocess.run(
        [RUNSTORE, "run", str(campaign / "campaign.toml"), "--store", str(store), "--init"],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise SystemExit(f"runstore run failed ({done.returncode}):\n{done.stderr}")
    wal = store / "run.sqlite3-wal"
    if wal.exists() and wal.stat().st_size:
        raise SystemExit(f"{wal} is not empty after a clean close: nothing is packed")
    return store


def pack(directory: Path, output: Path) -> None:
    """Pack ``directory``'s store root (without ``-wal`` and ``-shm``) and campaign into
    ``output``: entries sorted, modes kept, times fixed, owners cleared."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for top in (CAMPAIGN, STORE):
            paths = [directory / top, *sorted((directory / top).rglob("*"))]
            for path in paths:
                if path.name.endswith(("-wal", "-shm")):
                    continue
                info = archive.gettarinfo(str(path), arcname=str(path.relative_to(directory)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = MTIME, 0, 0, "", ""
                if info.isfile():
                    with path.open("rb") as handle:
                        archive.addfile(info, handle)
                else:
                    archive.addfile(info)
    output.parent.mkdir(parents=True, exist_ok=True)
    with (
        output.open("wb") as raw,
        gzip.GzipFile(
            filename="", mode="wb", fileobj=raw, mtime=MTIME, compresslevel=9
        ) as compressed,
    ):
        compressed.write(buffer.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the archive")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runstore-v1-fixture-") as scratch:
        directory = Path(scratch)
        build(directory)
        pack(directory, arguments.output)
    print(f"wrote {arguments.output} ({arguments.output.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
