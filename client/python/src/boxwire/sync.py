"""The synchronous client: the asyncio client on an event loop of its own.

A :class:`Client` starts one daemon thread running an event loop and runs
every call there, blocking the caller until it is done. It is safe for
concurrent use from several threads; :meth:`Client.close` stops the loop
(idempotent). Async code may share it through :meth:`Client.run_async`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

from . import wire
from .client import AsyncClient
from .session import AsyncSession, AsyncTerminal, ToolRunResult

T = TypeVar("T")


class _Portal:
    """An event loop on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, name="boxwire-loop", daemon=True)
        self.thread.start()
        ready.wait()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def future(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self.call(_anext(agen))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None and self.loop.is_running():
                self.call(aclose())

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)


async def _anext(agen: AsyncIterator[T]) -> T:
    return await agen.__anext__()


class Client:
    """The synchronous twin of :class:`AsyncClient` (same arguments)."""

    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 300.0) -> None:
        self._portal = _Portal()
        try:
            self.aio: AsyncClient = self._portal.call(_make(url, token, timeout))
        except BaseException:
            self._portal.stop()
            raise
        self._closed = False

    def __repr__(self) -> str:
        return f"Client(url={self.aio.url!r}, token=<redacted>)"

    @property
    def url(self) -> str:
        return self.aio.url

    def run_async(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """Run a coroutine of this client's async side from another event loop."""
        return asyncio.wrap_future(self._portal.future(coro))

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the client's loop and wait for it."""
        return self._portal.call(coro)

    def close(self) -> None:
        """Close the HTTP client and stop the loop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._portal.call(self.aio.aclose())
        finally:
            self._portal.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_thread(self, **kw: Any) -> wire.ThreadInfo:
        """See :meth:`AsyncClient.create_thread`."""
        return self.call(self.aio.create_thread(**kw))

    def get_thread(self, thread: str) -> wire.ThreadInfo:
        return self.call(self.aio.get_thread(thread))

    def list_threads(self) -> list[wire.ThreadInfo]:
        return self.call(self.aio.list_threads())

    def list_images(self) -> wire.ImageList:
        return self.call(self.aio.list_images())

    def update_thread(self, thread: str, *, egress: list[str]) -> wire.ThreadInfo:
        return self.call(self.aio.update_thread(thread, egress=egress))

    def delete_thread(self, thread: str) -> None:
        self.call(self.aio.delete_thread(thread))

    def transcript(self, thread: str, after: int = 0) -> list[wire.Envelope]:
        return self.call(self.aio.transcript(thread, after))

    def upload(self, thread: str, source: str | os.PathLike[str], dest: str = "", **kw: Any) -> wire.TransferResult:
        return self.call(self.aio.upload(thread, source, dest, **kw))

    def upload_bytes(self, thread: str, path: str, data: bytes, **kw: Any) -> wire.TransferResult:
        return self.call(self.aio.upload_bytes(thread, path, data, **kw))

    def download(self, thread: str, path: str, local_dir: str | os.PathLike[str], **kw: Any) -> wire.TransferResult:
        return self.call(self.aio.download(thread, path, local_dir, **kw))

    def download_bytes(self, thread: str, path: str, **kw: Any) -> bytes:
        return self.call(self.aio.download_bytes(thread, path, **kw))

    def connect(self, thread: str = "", after_seq: int = 0) -> Session:
        """See :meth:`AsyncClient.connect`."""
        return Session(self._portal, self.call(self.aio.connect(thread, after_seq)))


async def _make(url: str | None, token: str | None, timeout: float) -> AsyncClient:
    return AsyncClient(url, token, timeout=timeout)


class Session:
    """The synchronous twin of :class:`AsyncSession`."""

    def __init__(self, portal: _Portal, aio: AsyncSession) -> None:
        self._p = portal
        self.aio = aio

    @property
    def thread(self) -> str:
        return self.aio.thread

    @property
    def last_seq(self) -> int:
        return self.aio.last_seq

    def close(self) -> None:
        self._p.call(self.aio.close())

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ping(self) -> None:
        self._p.call(self.aio.ping())

    def events(self) -> Iterator[wire.Envelope]:
        return self._p.iterate(self.aio.events())

    def send(self, text: str) -> Iterator[wire.Envelope]:
        return self._p.iterate(self.aio.send(text))

    def chat(self, text: str) -> tuple[list[wire.Envelope], wire.TurnDone]:
        return self._p.call(self.aio.chat(text))

    def interrupt(self) -> None:
        self._p.call(self.aio.interrupt())

    def approve(self, approval_id: str, reason: str = "") -> None:
        self._p.call(self.aio.approve(approval_id, reason))

    def deny(self, approval_id: str, reason: str = "") -> None:
        self._p.call(self.aio.deny(approval_id, reason))

    def stream_tool(self, name: str, arguments: dict[str, Any]) -> Iterator[wire.Envelope]:
        return self._p.iterate(self.aio.stream_tool(name, arguments))

    def run_tool(self, name: str, arguments: dict[str, Any], *, timeout: float | None = None) -> ToolRunResult:
        return self._p.call(self.aio.run_tool(name, arguments, timeout=timeout))

    def terminal_open(self, command: list[str] | None = None, **kw: Any) -> Terminal:
        return Terminal(self._p, self._p.call(self.aio.terminal_open(command, **kw)))

    def terminal_attach(self, session: str) -> Terminal:
        return Terminal(self._p, self._p.call(self.aio.terminal_attach(session)))

    def terminal_list(self) -> list[wire.TerminalInfo]:
        return self._p.call(self.aio.terminal_list())


class Terminal:
    """The synchronous twin of :class:`AsyncTerminal`."""

    def __init__(self, portal: _Portal, aio: AsyncTerminal) -> None:
        self._p = portal
        self.aio = aio
        self.id = aio.id

    @property
    def attached(self) -> wire.TerminalAttached | None:
        return self.aio.attached

    @property
    def exit_code(self) -> int | None:
        return self.aio.exit_code

    def write(self, data: bytes | str) -> None:
        self._p.call(self.aio.write(data))

    def read(self, timeout: float | None = None) -> bytes:
        return self._p.call(self.aio.read(timeout))

    def read_until(self, needle: bytes, timeout: float = 30.0) -> bytes:
        return self._p.call(self.aio.read_until(needle, timeout))

    def resize(self, cols: int, rows: int) -> None:
        self._p.call(self.aio.resize(cols, rows))

    def signal(self, sig: str) -> None:
        self._p.call(self.aio.signal(sig))

    def detach(self) -> None:
        self._p.call(self.aio.detach())

    def close(self) -> None:
        self._p.call(self.aio.close())
