"""A runstore worker: hash one buffer size with one stdlib hashlib algorithm, for a while.

Usage: ``worker.py`` (no arguments): everything comes from the environment.

Worker protocol (SPEC.md section 15.3), as this worker uses it:

- ``RUNSTORE_CANDIDATE_PARAMETERS`` holds the candidate's parameters as a JSON object:
  ``{"algorithm": name}``, a name ``hashlib`` has a constructor for (``md5``, ``sha256``,
  ``blake2b``, ``sha3_256``, ...).
- ``RUNSTORE_PARAMETERS`` holds the problem's: ``{"size": int, "min_seconds": str,
  "seed": int}``. ``min_seconds`` is a float in the campaign file, so it arrives as its
  decimal text (``"0.05"``): canonical JSON has no floats. The buffer is
  ``random.Random(seed).randbytes(size)``.
- ``RUNSTORE_OUTPUT_DIR`` is an empty directory; the worker writes ``result.json`` there:
  ``{"metrics": {"throughput_mb_s", "ns_per_byte", "ns_per_call"}, "algorithm", "size",
  "calls", "elapsed_ns", "digest"}`` (MB = 10^6 bytes). ``digest`` is the buffer's digest,
  the same on every machine, so two runs can confirm they hashed the same bytes.
- Exit status: 0 on success, 2 on bad parameters; the reason goes to stderr.

How it measures: one untimed call first, then batches of calls, each batch twice as long as
the one before (as ``timeit``'s autorange does), until the timed batches together took at
least ``min_seconds``. Every call hashes the whole buffer from a fresh hash object and
takes its digest, so small buffers show the per-call cost and large ones the algorithm's
speed.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import NoReturn

MAX_SIZE = 64 * 2**20
MAX_SEED = 2**53 - 1
MAX_SECONDS = 10.0


def fail(message: str) -> NoReturn:
    print(f"worker: {message}", file=sys.stderr)
    sys.exit(2)


def json_object(name: str) -> dict[str, Any]:
    try:
        value = json.loads(os.environ.get(name, "{}"))
    except json.JSONDecodeError as error:
        fail(f"{name} is not JSON: {error}")
    if not isinstance(value, dict):
        fail(f"{name} must be a JSON object")
    return value


def algorithm(parameters: dict[str, Any]) -> tuple[str, Callable[[bytes], Any]]:
    """The candidate's ``algorithm`` and its hashlib constructor: ``hashlib.sha256`` rather
    than ``hashlib.new("sha256")``, whose name lookup would cost every call."""
    name = parameters.get("algorithm")
    if not isinstance(name, str) or name not in hashlib.algorithms_guaranteed:
        choices = ", ".join(sorted(hashlib.algorithms_guaranteed))
        fail(f"candidate parameter 'algorithm' must be one of {choices}, got {name!r}")
    if name.startswith("shake_"):
        fail(f"{name} has a variable-length digest; pick a fixed-length algorithm")
    return name, getattr(hashlib, name)


def problem(parameters: dict[str, Any]) -> tuple[int, float, int]:
    """``(size, min_seconds, seed)`` from the problem's parameters."""
    unknown = sorted(set(parameters) - {"size", "min_seconds", "seed"})
    if unknown:
        fail(f"unknown parameters: {', '.join(unknown)}")
    size, seed = parameters.get("size"), parameters.get("seed", 0)
    for key, value, low, high in (("size", size, 1, MAX_SIZE), ("seed", seed, 0, MAX_SEED)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            fail(f"parameter {key!r} must be an integer in {low}..{high}, got {value!r}")
    try:
        min_seconds = float(parameters.get("min_seconds", "0.05"))
    except (TypeError, ValueError):
        fail(f"parameter 'min_seconds' must be a number, got {parameters['min_seconds']!r}")
    if not (math.isfinite(min_seconds) and 0 < min_seconds <= MAX_SECONDS):
        fail(f"parameter 'min_seconds' must be in (0, {MAX_SECONDS}], got {min_seconds}")
    return size, min_seconds, seed


def measure(hash_of: Callable[[bytes], Any], data: bytes, min_seconds: float) -> tuple[int, int]:
    """``(calls, elapsed_ns)`` of the timed batches."""
    hash_of(data).digest()  # untimed: the first call pays for lazy setup
    budget_ns = int(min_seconds * 1e9)
    calls = elapsed_ns = 0
    batch = 1
    while elapsed_ns < budget_ns:
        start = time.perf_counter_ns()
        for _ in range(batch):
            hash_of(data).digest()
        elapsed_ns += time.perf_counter_ns() - start
        calls += batch
        batch *= 2
    return calls, elapsed_ns


def main() -> int:
    name, hash_of = algorithm(json_object("RUNSTORE_CANDIDATE_PARAMETERS"))
    size, min_seconds, seed = problem(json_object("RUNSTORE_PARAMETERS"))
    output_env = os.environ.get("RUNSTORE_OUTPUT_DIR")
    if not output_env:
        fail("RUNSTORE_OUTPUT_DIR is not set")

    data = random.Random(seed).randbytes(size)
    calls, elapsed_ns = measure(hash_of, data, min_seconds)
    hashed = calls * size
    result = {
        "metrics": {
            "throughput_mb_s": hashed / 1e6 / (elapsed_ns / 1e9),
            "ns_per_byte": elapsed_ns / hashed,
            "ns_per_call": elapsed_ns / calls,
        },
        "algorithm": name,
        "size": size,
        "calls": calls,
        "elapsed_ns": elapsed_ns,
        "digest": hash_of(data).hexdigest(),
    }
    Path(output_env, "result.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
