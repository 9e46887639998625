"""A runstore worker: compress a generated corpus with one stdlib codec at one level.

Usage: ``worker.py CODEC LEVEL`` with CODEC one of ``zlib`` (levels 0-9), ``bz2`` (1-9) or
``lzma`` (presets 0-9).

Worker protocol (SPEC.md section 15.3), as this worker uses it:

- ``RUNSTORE_PARAMETERS`` holds the problem's parameters as a JSON object:
  ``{"kind": "text" | "random" | "repetitive" | "json", "size": int, "seed": int}`` and
  optionally ``"repeat": int`` (default 3). The corpus is generated from them
  deterministically, so nothing is downloaded or shipped besides this file.
- ``RUNSTORE_OUTPUT_DIR`` is an empty directory; the worker writes ``result.json`` there:
  ``{"metrics": {...}, "codec", "level", "kind", "input_bytes", "input_sha256"}`` with
  metrics ``ratio``, ``compressed_bytes``, ``compress_mb_s`` and ``decompress_mb_s`` (best
  of the repeats, MB = 10^6 bytes). Everything but the two speeds is deterministic.
- Exit status: 0 on success, 1 when the round trip fails, 2 on bad arguments or
  parameters; the reason goes to stderr.
"""

from __future__ import annotations

import bz2
import hashlib
import json
import lzma
import os
import random
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from typing import NoReturn

Codec = tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]

LEVELS: dict[str, range] = {"zlib": range(0, 10), "bz2": range(1, 10), "lzma": range(0, 10)}
KINDS = ("text", "random", "repetitive", "json")
MAX_SIZE = 100_000_000
MAX_SEED = 2**53 - 1

VOCABULARY = (
    "the of and to in is that it was for on are as with his they at be this from have or "
    "by one had not but what all were when we there can an your which their said if do "
    "will each about how up out them then she many some so these would other into has more "
    "her two like him see time could no make than first been its who now people my made "
    "over did down only way find use may water long little very after words called just"
)
WORDS = tuple(VOCABULARY.split())
SERVICES = ("api", "auth", "billing", "search", "storage", "worker")
LOG_LEVELS = ("DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR")
MESSAGES = ("request served", "cache miss", "retrying", "slow query", "user login", "timeout")


def fail(code: int, message: str) -> NoReturn:
    print(f"worker: {message}", file=sys.stderr)
    sys.exit(code)


def make_codec(name: str, level: int) -> Codec:
    if name == "zlib":
        return (lambda data: zlib.compress(data, level)), zlib.decompress
    if name == "bz2":
        return (lambda data: bz2.compress(data, level)), bz2.decompress
    return (lambda data: lzma.compress(data, preset=level)), lzma.decompress


def text_corpus(rng: random.Random, size: int) -> bytes:
    """Pseudo-English: sentences of 4-16 words from a fixed vocabulary."""
    parts: list[str] = []
    length = 0
    while length < size:
        words = rng.choices(WORDS, k=rng.randint(4, 16))
        sentence = " ".join(words).capitalize() + rng.choice((". ", ". ", "? ", ".\n"))
        parts.append(sentence)
        length += len(sentence)
    return "".join(parts).encode("ascii")[:size]


def repetitive_corpus(rng: random.Random, size: int) -> bytes:
    """A short seeded pattern repeated, with about one mutated byte per 2000."""
    pattern = rng.randbytes(rng.randint(32, 256))
    data = bytearray((pattern * (size // len(pattern) + 1))[:size])
    for _ in range(size // 2000):
        data[rng.randrange(size)] = rng.randrange(256)
    return bytes(data)


def json_corpus(rng: random.Random, size: int) -> bytes:
    """Newline-delimited JSON log records."""
    lines: list[str] = []
    length = 0
    timestamp = 1_700_000_000_000
    while length < size:
        timestamp += rng.randint(0, 5000)
        record = {
            "ts": timestamp,
            "level": rng.choice(LOG_LEVELS),
            "service": rng.choice(SERVICES),
            "user": rng.randint(1, 5000),
            "latency_ms": rng.randint(1, 900),
            "msg": rng.choice(MESSAGES),
            "request": f"{rng.getrandbits(64):016x}",
        }
        line = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
        lines.append(line)
        length += len(line)
    return "".join(lines).encode("ascii")[:size]


def make_corpus(kind: str, size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if kind == "text":
        return text_corpus(rng, size)
    if kind == "random":
        return rng.randbytes(size)
    if kind == "repetitive":
        return repetitive_corpus(rng, size)
    return json_corpus(rng, size)


def int_parameter(
    parameters: dict[str, Any], key: str, low: int, high: int, default: int | None
) -> int:
    value = parameters.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        fail(2, f"parameter {key!r} must be an integer, got {value!r}")
    if not low <= value <= high:
        fail(2, f"parameter {key!r} must be in {low}..{high}, got {value}")
    return value


def read_parameters() -> tuple[str, int, int, int]:
    """``(kind, size, seed, repeat)`` from ``RUNSTORE_PARAMETERS``."""
    try:
        parameters = json.loads(os.environ.get("RUNSTORE_PARAMETERS", "{}"))
    except json.JSONDecodeError as error:
        fail(2, f"RUNSTORE_PARAMETERS is not JSON: {error}")
    if not isinstance(parameters, dict):
        fail(2, "RUNSTORE_PARAMETERS must be a JSON object")
    unknown = sorted(set(parameters) - {"kind", "size", "seed", "repeat"})
    if unknown:
        fail(2, f"unknown parameters: {', '.join(unknown)}")
    kind = parameters.get("kind")
    if kind not in KINDS:
        fail(2, f"parameter 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    size = int_parameter(parameters, "size", 1, MAX_SIZE, None)
    seed = int_parameter(parameters, "seed", 0, MAX_SEED, None)
    repeat = int_parameter(parameters, "repeat", 1, 100, 3)
    return kind, size, seed, repeat


def read_arguments(argv: list[str]) -> tuple[str, int]:
    if len(argv) != 2:
        fail(2, "usage: worker.py CODEC LEVEL (CODEC: zlib, bz2 or lzma)")
    name, level_text = argv
    if name not in LEVELS:
        fail(2, f"unknown codec {name!r}; expected one of {', '.join(LEVELS)}")
    levels = LEVELS[name]
    if not (level_text.isascii() and level_text.isdigit()) or int(level_text) not in levels:
        fail(2, f"bad level {level_text!r} for {name}: expected {levels[0]}..{levels[-1]}")
    return name, int(level_text)


def mb_per_s(size: int, elapsed_ns: int) -> float:
    return size / 1e6 / (max(elapsed_ns, 1) / 1e9)


def main(argv: list[str]) -> int:
    codec_name, level = read_arguments(argv)
    kind, size, seed, repeat = read_parameters()
    output_env = os.environ.get("RUNSTORE_OUTPUT_DIR")
    if not output_env:
        fail(2, "RUNSTORE_OUTPUT_DIR is not set")
    output_dir = Path(output_env)

    data = make_corpus(kind, size, seed)
    compress, decompress = make_codec(codec_name, level)
    compress_ns: list[int] = []
    decompress_ns: list[int] = []
    compressed = b""
    for _ in range(repeat):
        start = time.perf_counter_ns()
        compressed = compress(data)
        middle = time.perf_counter_ns()
        restored = decompress(compressed)
        end = time.perf_counter_ns()
        if restored != data:
            fail(1, f"round trip failed: {len(data)} bytes in, {len(restored)} bytes out")
        compress_ns.append(middle - start)
        decompress_ns.append(end - middle)

    result = {
        "metrics": {
            "ratio": len(data) / len(compressed),
            "compressed_bytes": len(compressed),
            "compress_mb_s": mb_per_s(len(data), min(compress_ns)),
            "decompress_mb_s": mb_per_s(len(data), min(decompress_ns)),
        },
        "codec": codec_name,
        "level": level,
        "kind": kind,
        "seed": seed,
        "repeat": repeat,
        "input_bytes": len(data),
        "input_sha256": hashlib.sha256(data).hexdigest(),
    }
    details = {"compress_ns": compress_ns, "decompress_ns": decompress_ns}
    (output_dir / "result.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    (output_dir / "details.json").write_text(json.dumps(details) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
