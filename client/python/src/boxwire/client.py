"""The asyncio client: the bridge's HTTP API and its WebSocket sessions."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from . import wire
from ._codec import from_dict
from .errors import BoxwireError, TooLarge, error_for
from .session import AsyncSession

DEFAULT_URL = "http://127.0.0.1:7420"
TAR = "application/x-tar"
RAW = "application/octet-stream"
UPLOAD_PROBE = 1 << 20


def _base_url(url: str) -> str:
    """http(s)://host:port from any of http, https, ws, wss URLs (a /v1/ws path is dropped)."""
    parts = urlsplit(url if "://" in url else "http://" + url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    if path.endswith(wire.WS_PATH):
        path = path[: -len(wire.WS_PATH)]
    return urlunsplit((scheme, parts.netloc, path, "", ""))


class AsyncClient:
    """A bridge, reached at ``url`` with ``token``.

    Without arguments it reads ``BOXWIRE_URL`` (default
    ``http://127.0.0.1:7420``) and ``BOXWIRE_TOKEN``. The token is never
    shown by ``repr``. Every HTTP error answer raises the exception named
    after its code (:mod:`boxwire.errors`).
    """

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 300.0) -> None:
        self.url = _base_url(url or os.environ.get("BOXWIRE_URL") or DEFAULT_URL)
        tok = token if token is not None else os.environ.get("BOXWIRE_TOKEN", "")
        if not tok:
            raise ValueError("no token: pass token= or set BOXWIRE_TOKEN")
        self._token = tok
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"Bearer {tok}"},
            timeout=httpx.Timeout(timeout, connect=30.0),
        )

    def __repr__(self) -> str:
        return f"AsyncClient(url={self.url!r}, token=<redacted>)"

    @property
    def ws_url(self) -> str:
        parts = urlsplit(self.url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        return urlunsplit((scheme, parts.netloc, parts.path + wire.WS_PATH, "", ""))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # HTTP plumbing.

    async def _call(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kw: Any) -> httpx.Response:
        try:
            resp = await self._http.request(method, path, **kw)
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as e:
            body = kw.get("content")
            if method == "PUT" and isinstance(body, bytes) and len(body) > UPLOAD_PROBE:
                # The bridge answers an upload over its limit with 413 at once
                # and closes the connection while the body is still going out.
                raise TooLarge(
                    f"the bridge closed the connection during an upload of {len(body)} bytes (over its upload limit?): {e}"
                ) from None
            raise
        if resp.status_code not in expect:
            await resp.aread()
            raise _http_error(resp)
        return resp

    # Threads.

    async def create_thread(
        self,
        *,
        image: str = "",
        runtime: str = "",
        scope: str = "",
        assistant: str = "",
        ttl: str = "",
        egress: list[str] | None = None,
        policy: Mapping[str, Any] | None = None,
        mcp: Mapping[str, Any] | None = None,
    ) -> wire.ThreadInfo:
        """Create a thread and its sandbox; returns once its agent answers.

        ``mcp`` declares MCP servers the agent runs inside the sandbox beside
        the image's, in the schema of the image's ``/etc/boxwire/mcp.json``:
        ``{"servers": [{"name", "command", "env"?, ...}]}`` (docs/tools.md);
        the bridge refuses a broken one with :class:`BadMessage`.
        """
        body: dict[str, Any] = {
            k: v
            for k, v in {
                "image": image,
                "runtime": runtime,
                "scope": scope,
                "assistant": assistant,
                "ttl": ttl,
                "egress": egress,
                "policy": policy,
                "mcp": mcp,
            }.items()
            if v
        }
        resp = await self._call("POST", "/v1/threads", json=body, expect=(201,))
        return from_dict(wire.ThreadInfo, resp.json(), strict=False)

    async def get_thread(self, thread: str) -> wire.ThreadInfo:
        """A thread's state; :class:`NotFound` when there is none."""
        resp = await self._call("GET", f"/v1/threads/{thread}")
        return from_dict(wire.ThreadInfo, resp.json(), strict=False)

    async def list_threads(self) -> list[wire.ThreadInfo]:
        """Every thread, oldest first (suspended ones too)."""
        resp = await self._call("GET", "/v1/threads")
        return [from_dict(wire.ThreadInfo, t, strict=False) for t in resp.json().get("threads") or []]

    async def list_images(self) -> wire.ImageList:
        """The images ``create_thread`` may name (GET /v1/images), the default first."""
        resp = await self._call("GET", "/v1/images")
        return from_dict(wire.ImageList, resp.json(), strict=False)

    async def update_thread(self, thread: str, *, egress: list[str]) -> wire.ThreadInfo:
        """Replace a thread's own egress rules (docs/egress-thread.md)."""
        resp = await self._call("PATCH", f"/v1/threads/{thread}", json={"egress": egress})
        return from_dict(wire.ThreadInfo, resp.json(), strict=False)

    async def delete_thread(self, thread: str) -> None:
        """Delete a thread with its sandbox, log and workspace; NotFound if none."""
        await self._call("DELETE", f"/v1/threads/{thread}", expect=(204,))

    async def transcript(self, thread: str, after: int = 0) -> list[wire.Envelope]:
        """The thread's logged events after seq ``after`` (docs/store.md)."""
        resp = await self._call("GET", f"/v1/threads/{thread}/events", params={"after": after})
        return [wire.Envelope.from_json(line) for line in resp.text.splitlines() if line.strip()]

    # Sessions.

    async def connect(self, thread: str = "", after_seq: int = 0) -> AsyncSession:
        """Open a WebSocket session on ``thread`` (empty: a new thread),
        receiving the events after ``after_seq``."""
        s = AsyncSession(self.ws_url, self._token, thread, after_seq)
        await s.open()
        return s

    # Files (docs/files.md).

    def _files(self, thread: str) -> str:
        return f"/v1/threads/{thread}/files"

    @staticmethod
    def _params(path: str, raw: bool, sandbox_paths: bool) -> dict[str, str]:
        p = {"path": path}
        if raw:
            p["format"] = "raw"
        if sandbox_paths:
            p["sandbox_paths"] = "1"
        return p

    async def upload_bytes(self, thread: str, path: str, data: bytes, *, sandbox_paths: bool = False) -> wire.TransferResult:
        """Write ``data`` as the file ``path`` (parents created)."""
        resp = await self._call(
            "PUT",
            self._files(thread),
            params=self._params(path, False, sandbox_paths),
            content=data,
            headers={"Content-Type": RAW},
        )
        return from_dict(wire.TransferResult, resp.json(), strict=False)

    async def upload(
        self, thread: str, source: str | os.PathLike[str], dest: str = "", *, sandbox_paths: bool = False
    ) -> wire.TransferResult:
        """Copy a local file or folder *into* the workspace folder ``dest``
        (as a tar stream). Per-file failures are in the result."""
        buf = io.BytesIO()
        src = Path(source)
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            tf.add(src, arcname=src.name)
        resp = await self._call(
            "PUT",
            self._files(thread),
            params=self._params(dest, False, sandbox_paths),
            content=buf.getvalue(),
            headers={"Content-Type": TAR},
        )
        return from_dict(wire.TransferResult, resp.json(), strict=False)

    async def download_bytes(self, thread: str, path: str, *, sandbox_paths: bool = False) -> bytes:
        """The bytes of one file."""
        resp = await self._call("GET", self._files(thread), params=self._params(path, True, sandbox_paths))
        return resp.content

    async def download(
        self, thread: str, path: str, local_dir: str | os.PathLike[str], *, sandbox_paths: bool = False
    ) -> wire.TransferResult:
        """Copy the workspace file or folder ``path`` into ``local_dir``
        (created). Entries the agent skipped are listed in the result."""
        async with self._http.stream("GET", self._files(thread), params=self._params(path, False, sandbox_paths)) as resp:
            if resp.status_code != 200:
                await resp.aread()
                raise _http_error(resp)
            data = await resp.aread()
            trailer = _trailer(resp)
        out = Path(local_dir)
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
            tf.extractall(out, filter="data")
        if trailer:
            return from_dict(wire.TransferResult, json.loads(trailer), strict=False)
        return wire.TransferResult(count=-1)


def _trailer(resp: httpx.Response) -> str:
    # httpx exposes no HTTP/1.1 trailers; a bridge that sends the results as a
    # header (or a future httpx) is honoured.
    return str(resp.headers.get("Boxwire-Results", ""))


def _http_error(resp: httpx.Response) -> BoxwireError:
    try:
        err = resp.json()["error"]
        return error_for(str(err["code"]), str(err["message"]), status=resp.status_code)
    except (ValueError, KeyError, TypeError):
        code = {401: "unauthorized", 404: "not_found", 413: "too_large"}.get(resp.status_code, "")
        return error_for(code, f"HTTP {resp.status_code}: {resp.text.strip()[:200]}", status=resp.status_code)
