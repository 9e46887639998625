"""The conformance kit (SPEC.md section 18): the driver protocol's two ends, the checks
that replay the vectors and drive an implementation in lockstep with the model, and the
reference driver serving this package's store."""

from .report import Check
from .report import Report
from .run import KitOptions
from .run import replay_transcript
from .run import run_kit

__all__ = ["Check", "KitOptions", "Report", "replay_transcript", "run_kit"]
