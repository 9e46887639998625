"""After a crash: recover the reopened store in lockstep with the model, then check what
the source's crash conformance requires of a recovered store.

Rules of this file: runs in a trial child on an open store whose projection matched the
model state ``state``. Recovery runs at :func:`~runstore.crashsim.continuation.start_time`
(after every lease of ``state`` expired), so every attempt the crash interrupted is
recoverable; the model decides the same pass over :func:`runstore.testing.disk.disk_view`
of the root, read independently of the store's recovery code. The checks (each a
:class:`~runstore.testing.lockstep.Diverged` when it fails):

* the reports and the projections agree (lockstep), and SQLite's integrity and foreign
  keys hold;
* every claim and lease is resolved, every attempt is terminal, no stage is left beside
  the objects and none was found busy (the crashed process is dead);
* the selections before recovery are all still there;
* every verified, claimed, published success survives: an unregistered attempt object
  that is the only one for its attempt, whose ``outcome.json`` is exactly the model's
  document of an ``Accepted`` outcome for the state before recovery and whose claim was
  live at its finish time, is that attempt's final artifact afterwards, accepted;
* no acceptance without evidence: an attempt recovery accepted has a final object on disk
  that verifies with its row's digests, whose ``outcome.json`` is the model's document for
  the state before recovery;
* every terminal attempt whose final object is on disk names it correctly: the document's
  attempt id, outcome state and finish time are the row's;
* at most one accepted attempt per slot;
* a second pass commits nothing and changes no row.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Final

from runstore import RunStore
from runstore import model as m
from runstore.audit.projection import model_projection
from runstore.audit.projection import store_projection
from runstore.canonical import decode_object
from runstore.canonical import ns_from_json
from runstore.crashsim.continuation import start_time
from runstore.enums import TERMINAL_STATES
from runstore.enums import AttemptState
from runstore.model import outcome_document
from runstore.outcome_json import read_outcome
from runstore.recovery_report import RecoveryReport
from runstore.requests import Accepted
from runstore.store.publication import staging
from runstore.testing.disk import disk_view
from runstore.testing.disk import read_object
from runstore.testing.lockstep import Diverged
from runstore.testing.lockstep import ModelWriter
from runstore.testing.lockstep import StageTokens
from runstore.testing.lockstep import lockstep
from runstore.testing.publishing import at

RECOVERY_TOKEN: Final = 0xDE_0000
"""The first stage token of a recovery pass's private stages."""


def recover_in_lockstep(store: RunStore, state: m.ModelState) -> m.ModelState:
    """Recover ``store`` (matching ``state``) in lockstep, check the recovered store, and
    return the model's state after the pass."""
    root = store.root
    t_ns = start_time(state)
    before = disk_view(root, state)
    model = ModelWriter(
        state, tokens=StageTokens(RECOVERY_TOKEN), disk=lambda s: disk_view(root, s)
    )
    previous = staging.install_token_source(StageTokens(RECOVERY_TOKEN))
    try:
        report = _pass(model, store, t_ns)
        _check_resolved(store, model.state, report)
        _check_selections(state, model.state)
        _check_survivors(state, model.state, before)
        _check_evidence(root, state, model.state, report)
        _check_documents(root, model.state)
        again = _pass(model, store, t_ns + 1)
    finally:
        staging.install_token_source(previous)
    if again.changed or again.terminals:
        raise Diverged(f"a second recovery changed the store: {again!r}")
    return model.state


def _pass(model: ModelWriter, store: RunStore, t_ns: int) -> RecoveryReport:
    try:
        report = lockstep(model, store, lambda w: w.recover(at(t_ns).fresh()))
    except Diverged as error:
        raise Diverged(f"recovery at {t_ns}: {error}") from error
    if store_projection(store.database_path) != model_projection(model.state):
        raise Diverged(f"after recovery at {t_ns} the projections differ")
    return report


def _check_resolved(store: RunStore, state: m.ModelState, report: RecoveryReport) -> None:
    if report.busy_stages:
        raise Diverged(f"recovery found stages busy after the crash: {report.busy_stages}")
    open_attempts = [a.id for a in state.attempts.values() if a.state not in TERMINAL_STATES]
    open_leases = [lease.id for lease in state.leases.values() if lease.released_at_ns is None]
    if open_attempts or open_leases or state.claims:
        raise Diverged(
            f"recovery left attempts {open_attempts}, leases {open_leases}, "
            f"claims {sorted(state.claims)} unresolved"
        )
    directory = os.path.join(store.root, staging.ARTIFACTS_DIR)
    names = os.listdir(directory) if os.path.isdir(directory) else []
    left = sorted(name for name in names if name.startswith(staging.STAGE_PREFIX))
    if left:
        raise Diverged(f"stages survived recovery: {left}")


def _check_selections(before: m.ModelState, after: m.ModelState) -> None:
    for slot, selection in before.selections.items():
        if after.selections.get(slot) != selection:
            raise Diverged(f"recovery changed the selection of {slot}")


def _accepted_document(state: m.ModelState, data: bytes | None) -> str | None:
    """The attempt an ``Accepted`` document names when it is exactly the model's document
    for ``state``, the attempt finalizing and holding a claim live at its finish time."""
    if data is None:
        return None
    try:
        claim = read_outcome(data)
    except Exception:
        return None
    attempt = state.attempts.get(claim.attempt_id)
    if attempt is None or attempt.state is not AttemptState.FINALIZING:
        return None
    if not isinstance(claim.outcome, Accepted):
        return None
    held = state.owned_claim(attempt.id)
    if held is None:
        return None
    lease = state.leases[held.lease_id]
    live = lease.released_at_ns is None and claim.finished_at_ns < lease.expires_at_ns
    if not live or claim.finished_at_ns < attempt.updated_at_ns:
        return None
    try:
        expected = outcome_document.outcome_document(
            state, attempt.id, claim.outcome, claim.references, claim.finished_at_ns
        )
    except Exception:
        return None
    return attempt.id if expected == data else None


def _check_survivors(before: m.ModelState, after: m.ModelState, disk: m.DiskView) -> None:
    """Each verified, claimed, published success that is alone for its attempt survives."""
    found: dict[str, list[str]] = {}
    for path, item in disk.objects.items():
        if item.registration is None or not path.startswith("artifacts/attempt-"):
            continue
        named = _accepted_document(before, item.outcome)
        if named is not None:
            found.setdefault(named, []).append(item.registration.id)
    for attempt_id, artifacts in found.items():
        row = after.attempts[attempt_id]
        if len(artifacts) == 1 and (row.state, row.final_artifact_id) != (
            AttemptState.ACCEPTED,
            artifacts[0],
        ):
            raise Diverged(f"the published success {artifacts[0]} of {attempt_id} was lost")


def _check_evidence(
    root: str, before: m.ModelState, after: m.ModelState, report: RecoveryReport
) -> None:
    """An attempt recovery accepted has its verified object and exactly the model's
    document for the state before recovery."""
    for terminal in report.terminals:
        if terminal.state is not AttemptState.ACCEPTED:
            continue
        artifact = after.artifacts[after.attempts[terminal.attempt_id].final_artifact_id or ""]
        registration, data = read_object(root, artifact.path)
        if registration is None or registration.manifest_sha256 != artifact.manifest_sha256:
            raise Diverged(f"{artifact.path} was accepted by recovery but does not verify")
        if _accepted_document(before, data) != terminal.attempt_id:
            raise Diverged(f"{terminal.attempt_id} was accepted by recovery without evidence")


def _check_documents(root: str, state: m.ModelState) -> None:
    accepted = Counter(
        a.slot_id for a in state.attempts.values() if a.state is AttemptState.ACCEPTED
    )
    for attempt in state.attempts.values():
        if attempt.final_artifact_id is None:
            continue
        artifact = state.artifacts[attempt.final_artifact_id]
        if not os.path.isdir(os.path.join(root, artifact.path)):
            continue  # a writer scenario's registration with no directory behind it
        data = read_object(root, artifact.path)[1]
        document = decode_object(data or b"{}")
        named = document.get("attempt", {})
        outcome = document.get("outcome", {})
        assert isinstance(named, dict) and isinstance(outcome, dict)
        finished = document.get("finished_at_ns")
        if (
            named.get("id") != attempt.id
            or outcome.get("state") != attempt.state.value
            or not isinstance(finished, str)
            or ns_from_json(finished) != attempt.finished_at_ns
        ):
            raise Diverged(f"{artifact.path} does not describe {attempt.id} as committed")
    crowded = {slot: count for slot, count in accepted.items() if count > 1}
    if crowded:
        raise Diverged(f"slots with more than one accepted attempt: {crowded}")
