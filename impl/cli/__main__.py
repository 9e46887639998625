"""``python -m runstore.cli``: the ``runstore`` command."""

from runstore.cli.app import main

main()
