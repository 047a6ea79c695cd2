"""A small client of `sia serve` (httpx, one kept-alive connection): what `sia shadow`, the
benchmarks and the Slurm poller post with. Connection failures are retried (event ids make a
retry idempotent); a refusal (4xx/5xx) is a :class:`ServiceRefused` naming the status and the
service's one-line error."""

from __future__ import annotations

import time
from typing import Any

import httpx
from sia.data.errors import SiaError


class ServiceRefused(SiaError):
    """The service answered with an error status."""

    def __init__(self, status: int, message: str):
        super().__init__(f"the service answered {status}: {message}")
        self.status = status


class Client:
    """Talk to the service at ``url`` with bearer ``token``."""

    def __init__(self, url: str, token: str | None, *, timeout_s: float = 120.0,
                 retries: int = 5):
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)
        self.retries = retries

    def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        for attempt in range(self.retries + 1):
            try:
                r = self.http.request(method, path, **kw)
                break
            except httpx.TransportError as exc:
                if attempt == self.retries:
                    raise SiaError(f"--url {self.url}: the service does not answer "
                                   f"({type(exc).__name__}: {exc})") from None
                time.sleep(min(2.0, 0.1 * 2 ** attempt))
        if r.status_code >= 400:
            try:
                message = r.json().get("error", r.text)
            except ValueError:
                message = r.text
            raise ServiceRefused(r.status_code, str(message))
        return r.json()

    def post_events(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        """POST a batch of events; the service's answer."""
        return self._call("POST", "/events", json={"events": events})

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        """GET a JSON endpoint."""
        return self._call("GET", path, params=params or None)

    def close(self) -> None:
        self.http.close()
