"""``cosmic-ray exec`` without the HTTP client's five-minute limit.

cosmic-ray's ``http`` distributor posts each mutant to a worker with aiohttp's default
client timeout (300 s in all). A mutant that survives runs every test that covers its
lines, which on a much-used module takes longer than that: the distributor would record an
abnormal result while the worker kept running. The session's own ``timeout`` (the limit on
the test command, enforced by the worker, a timeout counting as a kill) is the only limit
wanted, so this runs cosmic-ray's ``exec`` command with the client's limit lifted::

    python tools/mutation/exec_session.py CONFIG SESSION
"""

from __future__ import annotations

import functools
import sys


def main() -> int:
    import aiohttp
    from cosmic_ray import cli
    from cosmic_ray.distribution import http

    unlimited = aiohttp.ClientTimeout(total=None, sock_connect=30)
    http.aiohttp.request = functools.partial(aiohttp.request, timeout=unlimited)
    return int(cli.cli.main(["exec", *sys.argv[1:]], standalone_mode=False) or 0)


if __name__ == "__main__":
    sys.exit(main())
