"""Environment provenance end to end (SPEC.md section 15.4, "Environment provenance"): a
real ``runstore run`` of a 2 x 2 campaign, one candidate failing, commits one
``environment`` reference per attempt, all to one environment artifact staged once;
``explain`` shows the document read from that artifact (and a damaged artifact as a
problem); ``validate`` and ``audit`` pass on the store."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from runstore.inspection import explain
from runstore.runner import environment

from conformance.cli.world import runstore
from conformance.cli.world import write_campaign
from conformance.closed_store import rows


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store where candidate ``ok`` succeeded on two problems and ``bad`` failed on both."""
    directory = tmp_path_factory.mktemp("environment")
    campaign = write_campaign(directory / "c", [("ok", "ok"), ("bad", "fail")], ["p", "q"])
    store = directory / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init", "-j", "2")
    assert done.returncode == 1, done.stderr  # the failing candidate leaves two unsatisfied
    return store


def test_every_attempt_references_the_one_environment_artifact_staged_once(
    finished: Path,
) -> None:
    references = rows(
        finished,
        "SELECT a.id, a.state, (SELECT count(*) FROM attempt_artifacts AS r "
        "WHERE r.attempt_id = a.id AND r.role = 'environment'), (SELECT r.artifact_id "
        "FROM attempt_artifacts AS r WHERE r.attempt_id = a.id AND r.role = 'environment') "
        "FROM attempts AS a",
    )
    assert sorted(row[1] for row in references) == ["accepted", "accepted", "failed", "failed"]
    assert all(row[2] == 1 for row in references)
    ((artifact_id, kind),) = rows(
        finished, "SELECT id, kind FROM artifacts WHERE kind = 'environment'"
    )
    assert kind == "environment" and {row[3] for row in references} == {artifact_id}
    # Staged once: two observations, four attempt artifacts and one environment, each its
    # own stage; and rooted under one reservation lease only (the first publisher's).
    ((stages,),) = rows(finished, "SELECT count(*) FROM leases WHERE purpose = 'staging'")
    assert stages == 2 + 4 + 1
    ((roots,),) = rows(
        finished, "SELECT count(*) FROM leased_artifacts WHERE artifact_id = ?", (artifact_id,)
    )
    assert roots == 1


def test_explain_json_shows_the_document_of_the_verified_artifact(finished: Path) -> None:
    for target in ("e2e/ok/p", "e2e/bad/q"):
        shown = runstore("explain", target, "--store", str(finished), "--json")
        assert shown.returncode == 0, shown.stderr
        (item,) = json.loads(shown.stdout)["attempts"]
        found = item["environment"]
        assert found["problem"] is None
        ((artifact_id, path),) = rows(
            finished, "SELECT id, path FROM artifacts WHERE kind = 'environment'"
        )
        assert found["artifact_id"] == artifact_id
        stored = json.loads((finished / path / "environment.json").read_bytes())
        assert found["document"] == stored
        document = found["document"]
        assert document["host"] == socket.gethostname()
        assert document["cpu"]["count"] == os.cpu_count()
        assert (document["executor"], document["worker"]) == ("local", None)
        # the console script's interpreter: this virtual environment's
        assert Path(document["python"]["executable"]).parent == Path(sys.executable).parent
        assert item["state"] == ("accepted" if target.startswith("e2e/ok") else "failed")


def test_explain_shows_a_compact_environment_table(finished: Path) -> None:
    shown = runstore("explain", "e2e/bad/p", "--store", str(finished))
    assert shown.returncode == 0, shown.stderr
    assert "attempt 0 environment" in shown.stdout
    lines = {line.split(None, 1)[0]: line for line in shown.stdout.splitlines() if line.strip()}
    assert socket.gethostname() in lines["host"]
    assert "local" in lines["executor"] and f"{os.cpu_count()} cores" in lines["cpu"]


def test_validate_and_audit_pass_with_shared_environment_references(finished: Path) -> None:
    validated = runstore("validate", "--store", str(finished), "--json")
    assert validated.returncode == 0, validated.stdout
    assert json.loads(validated.stdout)["ok"] is True
    audited = runstore("audit", "--store", str(finished), "--json")
    assert audited.returncode == 0, audited.stdout


def test_a_damaged_environment_artifact_is_shown_as_a_problem(
    tmp_path: Path,
) -> None:
    campaign = write_campaign(tmp_path / "c", [("ok", "ok")], ["p"])
    store = tmp_path / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init")
    assert done.returncode == 0, done.stderr
    ((path,),) = rows(store, "SELECT path FROM artifacts WHERE kind = 'environment'")
    file = store / path / "environment.json"
    data = file.read_bytes()
    for directory in (store / path, file):
        directory.chmod(directory.stat().st_mode | stat.S_IWUSR)
    file.write_bytes(data.replace(b'"format"', b'"FORMAT"'))  # same size, other bytes
    shown = runstore("explain", "e2e/ok/p", "--store", str(store), "--json")
    assert shown.returncode == 0, shown.stderr
    found: Any = json.loads(shown.stdout)["attempts"][0]["environment"]
    assert found["document"] is None and "does not match" in found["problem"]
    text = runstore("explain", "e2e/ok/p", "--store", str(store))
    assert text.returncode == 0 and "problem" in text.stdout


def test_the_reader_and_the_runner_name_the_environment_alike() -> None:
    assert explain.ENVIRONMENT_ROLE == environment.ENVIRONMENT_ROLE
    assert explain.ENVIRONMENT_FILE == environment.ENVIRONMENT_FILE


def test_the_campaigns_packages_reach_the_document(tmp_path: Path) -> None:
    campaign = write_campaign(
        tmp_path / "c",
        [("ok", "ok")],
        ["p"],
        settings='packages = ["attrs", "no-such-distribution-xyz"]',
    )
    store = tmp_path / "store"
    done = runstore("run", str(campaign), "--store", str(store), "--init")
    assert done.returncode == 0, done.stderr
    shown = runstore("explain", "e2e/ok/p", "--store", str(store), "--json")
    document = json.loads(shown.stdout)["attempts"][0]["environment"]["document"]
    from importlib.metadata import version

    assert document["packages"] == {
        "attrs": version("attrs"),
        "no-such-distribution-xyz": None,
    }
