"""``python -m runstore.kit.driver``: this package's store served over the driver protocol
(SPEC.md section 18), the implementation the kit checks itself against.

Rules of this file: one request in, one response out, in order, on standard output only
(diagnostics go to standard error). A ``RunStoreError`` is the response's refusal; a
request the protocol cannot read (not JSON, no id, unknown shape) is answered with an
``invalid_record`` refusal, and an internal error by a ``run_store_error`` one (its
traceback on standard error): never by dying (SPEC.md section 18.1). ``--defect NAME`` plants one of
:data:`runstore.kit.defects.DEFECTS` for the kit's own tests. End of input closes the
store and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any
from typing import TextIO

from runstore.errors import RunStoreError

from . import defects
from .driver_store import StoreSession
from .driver_values import OPERATIONS
from .wire import PROTOCOL

Handler = Callable[[dict[str, Any]], dict[str, Any]]

IMPLEMENTATION = "runstore (Python reference) 1"


def handlers(session: StoreSession, defect: str | None) -> dict[str, Handler]:
    """Every operation this driver answers, with ``defect`` planted when named."""
    table: dict[str, Handler] = {
        "hello": lambda args: {"protocol": PROTOCOL, "implementation": IMPLEMENTATION},
        **OPERATIONS,
        **session.operations(),
    }
    if defect is not None:
        table = defects.DEFECTS[defect].plant(table, session)
    return table


def respond(table: dict[str, Handler], line: str) -> dict[str, Any]:
    """The response to one request line."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested past what a parser takes
        request = None
    if not isinstance(request, dict) or not isinstance(request.get("args"), dict):
        refused = {"code": "invalid_record", "message": "not a request object with args"}
        identifier = request.get("id") if isinstance(request, dict) else None
        return {"id": identifier, "refused": refused}
    op, identifier = request.get("op"), request.get("id")
    if not isinstance(op, str):
        refused = {"code": "invalid_record", "message": "a request's op is a string"}
        return {"id": identifier, "refused": refused}
    if op not in table:
        return {"id": identifier, "unsupported": op}
    try:
        return {"id": identifier, "result": table[op](request["args"])}
    except RunStoreError as error:
        return {"id": identifier, "refused": {"code": error.code, "message": str(error)}}
    except Exception as error:  # the protocol's rule: never die on input (SPEC.md 18.1)
        traceback.print_exc(file=sys.stderr)
        message = f"internal error: {type(error).__name__}: {error}"
        return {"id": identifier, "refused": {"code": "run_store_error", "message": message}}


def serve(table: dict[str, Handler], source: TextIO, sink: TextIO) -> None:
    for line in source:
        if not line.strip():
            continue
        sink.write(json.dumps(respond(table, line), ensure_ascii=True) + "\n")
        sink.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runstore.kit.driver",
        description="Serve this package's store over the driver protocol (SPEC.md section 18).",
    )
    parser.add_argument("--defect", choices=sorted(defects.DEFECTS), help="plant one defect")
    parser.add_argument(
        "--list-defects", action="store_true", help="list the defects and the check each fails"
    )
    options = parser.parse_args(argv)
    if options.list_defects:
        for name, defect in sorted(defects.DEFECTS.items()):
            print(f"{name}\t{defect.check}\t{defect.description}")
        return 0
    session = StoreSession()
    try:
        serve(handlers(session, options.defect), sys.stdin, sys.stdout)
    finally:
        session.close({})
    return 0


if __name__ == "__main__":
    sys.exit(main())
