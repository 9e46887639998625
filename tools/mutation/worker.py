"""A cosmic-ray HTTP worker that listens on the loopback interface only.

``cosmic-ray http-worker --port P`` listens on every interface, and each request names the
command the worker runs: anyone who can reach the port could run commands here. This is the
same worker (cosmic-ray's own request handler) bound to 127.0.0.1::

    python tools/mutation/worker.py --port P
"""

from __future__ import annotations

import argparse


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True, help="the loopback port")
    port = parser.parse_args().port
    from aiohttp import web
    from cosmic_ray.distribution.http import handle_mutate_and_test

    app = web.Application()
    app.add_routes([web.post("/", handle_mutate_and_test)])
    web.run_app(app, host="127.0.0.1", port=port, print=None)


if __name__ == "__main__":
    main()
