"""Running request cases against a driver: each case one or more requests, each request's
reply checked by an expectation; the results gathered into a :class:`~.report.Check`.

Rules of this file: a check stops at its first failing case (the report names it) and is
*not implemented* at the first request the driver does not support. A protocol failure
fails the check and restarts the driver for the next one (:class:`Drivers`).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import attrs
from runstore.errors import RunStoreError

from .client import Driver
from .client import ProtocolFailure
from .client import Reply
from .report import FAIL
from .report import NOT_IMPLEMENTED
from .report import Check
from .report import first_difference
from .wire import same
from .wire import value_of

Expect = Callable[[Reply], "str | None"]
"""An expectation: None when the reply is right, else what was wrong."""


@attrs.frozen
class Request:
    op: str
    args: dict[str, Any]
    expect: Expect


@attrs.frozen
class Case:
    name: str
    requests: tuple[Request, ...]


class Drivers:
    """A driver command and its current process, started on first use and after a
    protocol failure ended the last one."""

    def __init__(self, command: list[str], timeout: float) -> None:
        self.command = command
        self.timeout = timeout
        self._driver: Driver | None = None
        self.implementation = ""

    def current(self) -> Driver:
        if self._driver is None:
            self._driver = Driver(self.command, timeout=self.timeout).start()
            self.implementation = self._driver.implementation
        return self._driver

    def fresh(self) -> Driver:
        """A new process (the current one ended)."""
        self.end()
        self._driver = Driver(self.command, timeout=self.timeout).start()
        self.implementation = self._driver.implementation
        return self._driver

    def alive(self, driver: Driver) -> bool:
        """Whether ``driver`` is still the current process."""
        return self._driver is driver

    def end(self) -> None:
        if self._driver is not None:
            driver, self._driver = self._driver, None
            driver.kill()
            driver.close()


def run_cases(drivers: Drivers, check: Check, cases: Iterable[Case]) -> Check:
    """Run ``cases`` into ``check`` (its status, case count and detail)."""
    for case in cases:
        for request in case.requests:
            try:
                reply = drivers.current().request(request.op, request.args)
            except ProtocolFailure as failure:
                drivers.end()
                check.status, check.detail = FAIL, f"case {case.name!r}: protocol: {failure}"
                return check
            if reply.kind == "unsupported":
                check.status, check.detail = NOT_IMPLEMENTED, f"{request.op} is unsupported"
                return check
            wrong = request.expect(reply)
            if wrong is not None:
                check.status = FAIL
                check.detail = f"case {case.name!r}: {request.op}: {wrong}"
                return check
        check.cases += 1
    return check


# --- expectations --------------------------------------------------------------------------


def _shown(reply: Reply) -> str:
    if reply.kind == "refused":
        return f"refused {reply.value}"
    return f"result {str(reply.value)[:200]}"


def refused(code: str) -> Expect:
    def expect(reply: Reply) -> str | None:
        if reply.kind == "refused" and reply.value == code:
            return None
        return f"expected refused {code}, got {_shown(reply)}"

    return expect


def fields(expected: dict[str, Any]) -> Expect:
    """A result whose listed members equal ``expected`` (hex members compared as bytes,
    the first difference named)."""

    def expect(reply: Reply) -> str | None:
        if reply.kind != "result" or not isinstance(reply.value, dict):
            return f"expected a result, got {_shown(reply)}"
        for key, want in expected.items():
            got = reply.value.get(key)
            if got == want:
                continue
            if key.endswith("_hex") and isinstance(got, str):
                try:
                    return f"{key}: " + first_difference(bytes.fromhex(want), bytes.fromhex(got))
                except ValueError:
                    return f"{key}: not hex: {got[:80]}"
            return f"{key}: expected {str(want)[:120]}, got {str(got)[:120]}"
        return None

    return expect


def value(description: list[Any]) -> Expect:
    """A ``{value}`` result denoting the same value as ``description`` (SPEC.md 18.2)."""

    def expect(reply: Reply) -> str | None:
        if reply.kind != "result" or not isinstance(reply.value, dict):
            return f"expected a result, got {_shown(reply)}"
        try:
            got = value_of(reply.value.get("value"))
        except RunStoreError as error:  # value_of refuses every malformed description
            return f"the value description does not read: {error}"
        if same(got, value_of(description)):
            return None
        return f"decoded {str(reply.value.get('value'))[:120]}, expected {str(description)[:120]}"

    return expect


def succeeds(reply: Reply) -> str | None:
    return None if reply.kind == "result" else f"expected a result, got {_shown(reply)}"
