"""Run the service on uvicorn: a socket bound first (so port 0 gets a free port, announced on
stdout and in ``STATE/address``), one line of structured log per request at info level."""

from __future__ import annotations

import logging
import socket
import sys
from pathlib import Path
from typing import Any

from sia.data.errors import ConfigError

#: Hosts that mean "this machine only".
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: any free port); ConfigError naming the option
    when it cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP: asyncio then sets TCP_NODELAY on the accepted connections (with proto
    # 0 it does not, and every answer waits ~40 ms for a delayed ACK)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--host {host} --port {port}: cannot listen there ({exc.strerror})"
                          ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(app: Any, sock: socket.socket, state_dir: Path, log_level: str = "info") -> None:
    """Serve ``app`` on ``sock`` until interrupted."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    (Path(state_dir) / "address").write_text(url + "\n")
    logging.basicConfig(level=getattr(logging, log_level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr)
    print(f"sia serve: listening on {url}", flush=True)
    # proxy_headers off: the service reads no client address, and the middleware that would
    # rewrite it from X-Forwarded-For costs every request
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off",
                            timeout_keep_alive=30, proxy_headers=False)
    uvicorn.Server(config).run(sockets=[sock])
