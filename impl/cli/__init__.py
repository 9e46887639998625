"""runstore.cli: the ``runstore`` command, a thin typer layer (SPEC.md section 15.7).

Rules of this package: parse, call one library function, render. ``app`` holds the typer
application and its commands, ``output`` what they print (JSON, progress, tables) and
``render`` the reading commands' human tables, built from the same JSON documents
``--json`` prints. It may import the runner, the audit, the store and the value layer;
nothing imports it.
"""

from runstore.cli.app import app
from runstore.cli.app import main

__all__ = ["app", "main"]
