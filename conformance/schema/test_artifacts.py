"""Artifacts: kinds, digests, normalized paths, identity agreement, immutability, and the
reference tables that keep them alive."""

from __future__ import annotations

import pytest

from conformance.schema.rows import ARTIFACT_KINDS
from conformance.schema.rows import Rows
from conformance.schema.rows import check_failed
from conformance.schema.rows import count
from conformance.schema.rows import fk_failed
from conformance.schema.rows import hexdigest
from conformance.schema.rows import insert
from conformance.schema.rows import refused
from conformance.schema.rows import row_of

DIGEST = hexdigest("content")

BAD_PATHS = [
    "",
    "/",
    "/artifacts/x",
    "artifacts/x/",
    "artifacts//x",
    ".",
    "..",
    "./artifacts/x",
    "artifacts/./x",
    "artifacts/../x",
    "artifacts/x/..",
    "artifacts/x/.",
    "../artifacts/x",
    "artifacts\\x",
    "artifacts/x\x00y",
    "artifacts/x\ny",
    "artifacts/x\ty",
    "artifacts/x\x1f",
    "artifacts/x\x7f",
    "artifacts/x\x85",
]

GOOD_STAGING_PATHS = [
    "artifacts/.staging-1",
    "artifacts/.quarantine/.staging-1",
    "a/..b/c...",
    "artifacts/ünïcode name",
]


@pytest.mark.parametrize("kind", ARTIFACT_KINDS)
def test_every_kind_is_registrable(rows: Rows, kind: str) -> None:
    artifact = rows.artifact(kind)
    assert artifact.startswith(f"run-store-v1:{kind}-")


@pytest.mark.parametrize("kind", ["Attempt", "log", "", "staging", "attempt "])
def test_unknown_kinds_are_refused(rows: Rows, kind: str) -> None:
    row = rows.artifact_row(
        kind,
        id=f"run-store-v1:{kind}-{DIGEST}",
        path=f"artifacts/{kind}-{DIGEST}".replace(" ", "_"),
    )
    with check_failed("artifact_kind"):
        insert(rows.conn, "artifacts", row)
    assert count(rows.conn, "artifacts") == 0


@pytest.mark.parametrize(
    "digest",
    [
        DIGEST.upper(),
        DIGEST[:63],
        DIGEST + "0",
        DIGEST[:63] + "g",
        DIGEST[:63] + " ",
        DIGEST[:63] + "é",
        "",
    ],
)
@pytest.mark.parametrize("column", ["content_sha256", "manifest_sha256"])
def test_digests_are_lowercase_hex_64(rows: Rows, digest: str, column: str) -> None:
    constraint = (
        "artifact_content_digest" if column == "content_sha256" else ("artifact_manifest_digest")
    )
    with check_failed(constraint):
        rows.artifact("dataset", **{column: digest})
    assert count(rows.conn, "artifacts") == 0


@pytest.mark.parametrize("path", BAD_PATHS)
def test_artifact_paths_are_normalized(rows: Rows, path: str) -> None:
    with check_failed("artifact_path_normalized"):
        rows.artifact("dataset", path=path)
    assert count(rows.conn, "artifacts") == 0


@pytest.mark.parametrize("path", BAD_PATHS)
def test_staging_paths_are_normalized(rows: Rows, path: str) -> None:
    with check_failed("lease_staging_path_normalized"):
        rows.lease(purpose="staging", staging_path=path)
    assert count(rows.conn, "leases") == 0


@pytest.mark.parametrize("path", GOOD_STAGING_PATHS)
def test_normalized_paths_are_accepted(rows: Rows, path: str) -> None:
    rows.lease(purpose="staging", staging_path=path)


@pytest.mark.parametrize(
    ("overrides", "constraint"),
    [
        ({"id": f"run-store-v1:result-{DIGEST}"}, "artifact_id_matches_content"),
        ({"id": f"run-store-v2:dataset-{DIGEST}"}, "artifact_id_matches_content"),
        ({"id": f"run-store-v1:dataset-{hexdigest('other')}"}, "artifact_id_matches_content"),
        ({"path": f"artifacts/result-{DIGEST}"}, "artifact_path_matches_content"),
        ({"path": f"objects/dataset-{DIGEST}"}, "artifact_path_matches_content"),
        ({"path": f"artifacts/dataset-{DIGEST}/x"}, "artifact_path_matches_content"),
    ],
)
def test_id_and_path_agree_with_kind_and_content(
    rows: Rows, overrides: dict[str, str], constraint: str
) -> None:
    row = rows.artifact_row(
        "dataset",
        content_sha256=DIGEST,
        id=f"run-store-v1:dataset-{DIGEST}",
        path=f"artifacts/dataset-{DIGEST}",
    )
    row.update(overrides)
    with check_failed(constraint):
        insert(rows.conn, "artifacts", row)
    assert count(rows.conn, "artifacts") == 0


def test_artifacts_are_immutable_and_undeletable(rows: Rows) -> None:
    artifact = rows.artifact("dataset")
    conn = rows.conn
    before = row_of(conn, "artifacts", "id = ?", artifact)
    with refused("artifacts: rows are immutable"):
        conn.execute(
            "UPDATE artifacts SET verified_at_ns = verified_at_ns + 1 WHERE id = ?", (artifact,)
        )
    with refused("artifacts: rows cannot be deleted"):
        conn.execute("DELETE FROM artifacts WHERE id = ?", (artifact,))
    names = [c[1] for c in conn.execute("PRAGMA table_info(artifacts)")]
    replacement = dict(zip(names, before, strict=True)) | {"manifest_sha256": hexdigest("m2")}
    with refused("artifacts: rows cannot be deleted"):
        insert(conn, "artifacts", replacement, "INSERT OR REPLACE")
    assert row_of(conn, "artifacts", "id = ?", artifact) == before


def test_attempt_references_name_existing_artifacts_in_named_roles(rows: Rows) -> None:
    world = rows.world()
    attempt = rows.attempt_in(world.slot, "finalizing")
    dataset = rows.artifact("dataset")
    source = rows.artifact("source")
    conn = rows.conn
    for role, artifact in (("dataset", dataset), ("source", source), ("dataset", source)):
        insert(
            conn,
            "attempt_artifacts",
            {"attempt_id": attempt, "role": role, "artifact_id": artifact},
        )
    with refused("UNIQUE constraint failed: attempt_artifacts"):
        insert(
            conn,
            "attempt_artifacts",
            {"attempt_id": attempt, "role": "dataset", "artifact_id": dataset},
        )
    for role in ("", "final"):
        with check_failed("attempt_artifact_role"):
            insert(
                conn,
                "attempt_artifacts",
                {"attempt_id": attempt, "role": role, "artifact_id": dataset},
            )
    with fk_failed():
        insert(
            conn,
            "attempt_artifacts",
            {
                "attempt_id": attempt,
                "role": "environment",
                "artifact_id": "run-store-v1:environment-" + "0" * 64,
            },
        )
    with fk_failed():
        insert(
            conn,
            "attempt_artifacts",
            {"attempt_id": "attempt:v1:" + "0" * 64, "role": "dataset", "artifact_id": dataset},
        )
    assert count(conn, "attempt_artifacts") == 3
    # References stay with the attempt whatever its outcome.
    rows.advance(attempt, "failed")
    assert count(conn, "attempt_artifacts", "attempt_id = ?", attempt) == 3
