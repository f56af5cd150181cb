"""One WebSocket connection bound to one thread (asyncio).

An :class:`AsyncSession` owns exactly one reader task, started by
:meth:`AsyncSession.open` and ended by :meth:`AsyncSession.close`. The
reader routes each frame: events (with a seq) to every subscriber in seq
order, once each; replies (no seq) to the request that caused them; binary
frames to the terminal they belong to. When the connection drops, the reader
reconnects with ``after_seq`` set to the last event it delivered, so a
subscriber sees every event once, with no gap (docs/protocol.md, Resume).

Methods are safe to call from several tasks of the session's event loop at
once; none is safe from another thread (the sync client runs its own loop).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed as WSClosed
from websockets.exceptions import InvalidStatus

from . import wire
from .errors import BoxwireError, ConnectionClosed, Unauthorized, error_for

log = logging.getLogger("boxwire")

# Bounds. Every wait has one.
HELLO_TIMEOUT = 120.0  # a new thread's sandbox may take a while to start
RECONNECT_DEADLINE = 30.0
MAX_FRAME = 16 << 20
BACKLOG = 10000  # events kept for the first events() caller


def new_id(prefix: str) -> str:
    """A request id unlikely to collide with any other client's."""
    return f"{prefix}_{secrets.token_hex(6)}"


@dataclass
class _Subscriber:
    queue: asyncio.Queue[wire.Envelope | BaseException]
    id: str = ""  # only events (and error replies) with this id; "" for all


@dataclass
class ToolRunResult:
    """A finished run_tool: its result and every output chunk streamed."""

    result: wire.ToolResult
    call: wire.ToolCall | None
    streamed: str = ""


@dataclass
class _TerminalState:
    session: str
    output: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    exit_code: int | None = None
    attached: wire.TerminalAttached | None = None


class AsyncSession:
    """A connection to one thread of a bridge. Use :meth:`AsyncClient.connect`."""

    def __init__(self, ws_url: str, token: str, thread: str = "", after_seq: int = 0) -> None:
        self._url = ws_url
        self._token = token
        self.thread = thread
        self.last_seq = after_seq
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._subs: list[_Subscriber] = []
        self._pending: dict[str, asyncio.Future[wire.Envelope]] = {}
        self._terminals: dict[str, _TerminalState] = {}
        self._closed = False
        self._error: BaseException | None = None
        # Events that came while nobody watched every event (the replay right
        # after hello): the first events() starts with them.
        self._backlog: collections.deque[wire.Envelope] = collections.deque(maxlen=BACKLOG)
        self.hello: wire.Hello | None = None

    # Life cycle.

    async def open(self) -> None:
        """Dial, say hello and start the reader. Raises the hello's error."""
        await self._dial()
        self._reader = asyncio.get_running_loop().create_task(self._read_loop())

    async def _dial(self) -> None:
        try:
            ws = await websockets.connect(
                self._url,
                additional_headers={"Authorization": f"Bearer {self._token}"},
                max_size=MAX_FRAME,
                open_timeout=HELLO_TIMEOUT,
            )
        except InvalidStatus as e:
            if e.response.status_code == 401:
                raise Unauthorized("the bridge refused the token (HTTP 401)", status=401) from None
            raise BoxwireError(f"WebSocket upgrade refused: HTTP {e.response.status_code}") from None
        hid = new_id("h")
        hello = wire.Hello(version=wire.VERSION, role="client", thread=self.thread, after_seq=self.last_seq)
        await ws.send(wire.Envelope(wire.HELLO, id=hid, data=wire.encode_payload(hello)).to_json())
        try:
            env = wire.Envelope.from_json(await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT))
        except WSClosed as e:
            raise ConnectionClosed(f"connection closed during hello: {e}") from None
        if env.type == wire.ERROR:
            err = env.payload()
            await ws.close()
            raise error_for(err.code, err.message)
        if env.type != wire.HELLO:
            await ws.close()
            raise BoxwireError(f"expected hello, got {env.type}", code="bad_message")
        self.hello = env.payload()
        assert self.hello is not None
        self.thread = self.hello.thread
        if self.hello.after_seq < self.last_seq:  # seq_ahead: take the log's end as the cursor
            self.last_seq = self.hello.after_seq
        self._ws = ws

    async def close(self) -> None:
        """Close the connection and stop the reader. Idempotent."""
        self._closed = True
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        self._fail(ConnectionClosed("session closed"))

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # The reader.

    async def _read_loop(self) -> None:
        while not self._closed:
            ws = self._ws
            assert ws is not None
            try:
                async for frame in ws:
                    if isinstance(frame, bytes):
                        self._on_binary(frame)
                    else:
                        self._on_text(wire.Envelope.from_json(frame))
            except WSClosed:
                pass
            except Exception as e:  # a frame we cannot parse: the session is unusable
                self._fail(e)
                return
            if self._closed:
                return
            rcvd = ws.protocol.close_rcvd
            if rcvd is not None and rcvd.code == 1000:  # deleted, suspended, refused: done
                self._fail(ConnectionClosed(f"connection closed by the bridge: {rcvd.reason or rcvd.code}"))
                return
            try:
                await self._reconnect()
            except BaseException as e:
                self._fail(e)
                return

    async def _reconnect(self) -> None:
        """Dial again from last_seq until the deadline; re-attach terminals."""
        await asyncio.wait_for(self._redial(), RECONNECT_DEADLINE)
        for sid in list(self._terminals):
            await self._send(wire.TERMINAL_ATTACH, new_id("ta"), wire.TerminalRef(session=sid))

    async def _redial(self) -> None:
        delay = 0.05
        while True:
            try:
                await self._dial()
                return
            except (OSError, ConnectionClosed, WSClosed, TimeoutError) as e:
                log.debug("boxwire: reconnect: %s", e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _fail(self, err: BaseException) -> None:
        if self._error is None:
            self._error = err
        for sub in self._subs:
            sub.queue.put_nowait(err)
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        for t in self._terminals.values():
            t.output.put_nowait(None)

    def _on_text(self, env: wire.Envelope) -> None:
        if env.seq:
            if env.seq <= self.last_seq:
                return  # a repeat (never expected after resume, but never delivered twice)
            self.last_seq = env.seq
            watched = False
            for sub in self._subs:
                if not sub.id or sub.id == env.id:
                    sub.queue.put_nowait(env)
                watched = watched or not sub.id
            if not watched:
                self._backlog.append(env)
            return
        fut = self._pending.pop(env.id, None) if env.id else None
        if fut is not None and not fut.done():
            fut.set_result(env)
            return
        if env.type == wire.ERROR and env.id:
            for sub in self._subs:
                if sub.id == env.id:
                    sub.queue.put_nowait(env)
            return
        self._on_terminal(env)

    def _on_terminal(self, env: wire.Envelope) -> None:
        if env.type == wire.TERMINAL_EXIT:
            ex: wire.TerminalExit = env.payload()
            t = self._terminals.get(ex.session)
            if t is not None:
                t.exit_code = ex.exit_code
                t.output.put_nowait(None)
        elif env.type == wire.TERMINAL_ATTACHED:
            at: wire.TerminalAttached = env.payload()
            t = self._terminals.get(at.session)
            if t is not None:
                t.attached = at
        elif env.type == wire.TERMINAL_DETACHED:
            det: wire.TerminalDetached = env.payload()
            log.debug("boxwire: terminal %s detached: %s", det.session, det.reason)

    def _on_binary(self, frame: bytes) -> None:
        kind, sid, data = wire.parse_frame(frame)
        t = self._terminals.get(sid)
        if kind == wire.FRAME_OUTPUT and t is not None:
            t.output.put_nowait(data)

    # Sending.

    async def _send(self, typ: str, rid: str = "", payload: Any = None) -> None:
        if self._error is not None:
            raise self._error
        ws = self._ws
        assert ws is not None
        env = wire.Envelope(typ, id=rid, data=wire.encode_payload(payload))
        await ws.send(env.to_json())

    async def _request(self, typ: str, payload: Any = None, *, timeout: float = 60.0) -> wire.Envelope:
        """Send a request and wait for its reply; an error reply raises."""
        rid = new_id(typ[:2])
        fut: asyncio.Future[wire.Envelope] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self._send(typ, rid, payload)
            env = await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(rid, None)
        _raise_if_error(env)
        return env

    async def _checked(self, typ: str, payload: Any = None, *, timeout: float = 60.0) -> None:
        """Send a request that has no answer unless it fails, followed by a
        ping: requests are handled in order, so the pong (or the request's
        error first) says how it went."""
        rid = new_id(typ[:2])
        fut: asyncio.Future[wire.Envelope] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self._send(typ, rid, payload)
            ping = asyncio.ensure_future(self._request(wire.PING, timeout=timeout))
            done, _ = await asyncio.wait({fut, ping}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if fut in done:
                ping.cancel()
                _raise_if_error(fut.result())
            elif ping in done:
                ping.result()
                await asyncio.sleep(0)  # an error queued with the pong
                if fut.done():
                    _raise_if_error(fut.result())
            else:
                ping.cancel()
                raise TimeoutError(f"no answer to {typ} within {timeout}s")
        finally:
            self._pending.pop(rid, None)

    def _subscribe(self, rid: str = "") -> _Subscriber:
        sub = _Subscriber(asyncio.Queue(), rid)
        if self._error is not None:
            sub.queue.put_nowait(self._error)
        self._subs.append(sub)
        return sub

    def _unsubscribe(self, sub: _Subscriber) -> None:
        with contextlib.suppress(ValueError):
            self._subs.remove(sub)

    # The API.

    async def ping(self, *, timeout: float = 30.0) -> None:
        """Round trip to the agent through the bridge."""
        await self._request(wire.PING, timeout=timeout)

    async def events(self) -> AsyncIterator[wire.Envelope]:
        """Every event of the thread from now on (after the cursor), in seq order."""
        sub = self._subscribe()
        while self._backlog:
            sub.queue.put_nowait(self._backlog.popleft())
        try:
            while True:
                item = await sub.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._unsubscribe(sub)

    async def send(self, text: str) -> AsyncIterator[wire.Envelope]:
        """Start a turn and yield its events, ending with its ``turn_done``.

        An ``error`` reply (``busy``) raises; an ``error`` event of the turn
        (``llm_error``) is yielded like the other events.
        """
        rid = new_id("m")
        sub = self._subscribe(rid)
        try:
            await self._send(wire.USER_MESSAGE, rid, wire.UserMessage(text=text))
            async for env in _drain(sub, wire.TURN_DONE):
                yield env
        finally:
            self._unsubscribe(sub)

    async def chat(self, text: str) -> tuple[list[wire.Envelope], wire.TurnDone]:
        """Run one turn to its end: its events and its ``turn_done``."""
        events = [env async for env in self.send(text)]
        return events, events[-1].payload()

    async def interrupt(self) -> None:
        """Cancel the running turn and every running run_tool (no answer)."""
        await self._send(wire.INTERRUPT, new_id("i"))

    async def approve(self, approval_id: str, reason: str = "") -> None:
        """Approve a held action; :class:`NotFound` when it is not pending."""
        await self._checked(wire.APPROVE, wire.ApprovalAnswer(approval_id=approval_id, reason=reason))

    async def deny(self, approval_id: str, reason: str = "") -> None:
        """Deny a held action; :class:`NotFound` when it is not pending."""
        await self._checked(wire.DENY, wire.ApprovalAnswer(approval_id=approval_id, reason=reason))

    async def stream_tool(self, name: str, arguments: dict[str, Any]) -> AsyncIterator[wire.Envelope]:
        """Run one tool directly; yield its tool_call, tool_output… and tool_result."""
        rid = new_id("r")
        sub = self._subscribe(rid)
        try:
            await self._send(wire.RUN_TOOL, rid, wire.RunTool(name=name, arguments=arguments))
            async for env in _drain(sub, wire.TOOL_RESULT):
                yield env
        finally:
            self._unsubscribe(sub)

    async def run_tool(self, name: str, arguments: dict[str, Any], *, timeout: float | None = None) -> ToolRunResult:
        """Run one tool directly and wait for its result."""
        return await asyncio.wait_for(self._run_tool(name, arguments), timeout)

    async def _run_tool(self, name: str, arguments: dict[str, Any]) -> ToolRunResult:
        call: wire.ToolCall | None = None
        chunks: list[str] = []
        async for env in self.stream_tool(name, arguments):
            if env.type == wire.TOOL_CALL:
                call = env.payload()
            elif env.type == wire.TOOL_OUTPUT:
                chunks.append(env.payload().output)
            elif env.type == wire.TOOL_RESULT:
                return ToolRunResult(env.payload(), call, "".join(chunks))
        raise ConnectionClosed("run_tool ended without a tool_result")

    # Terminals.

    async def terminal_open(
        self,
        command: list[str] | None = None,
        *,
        cols: int = 0,
        rows: int = 0,
        env: dict[str, str] | None = None,
        dir: str = "",
    ) -> AsyncTerminal:
        """Open a PTY session; this connection is attached to it."""
        req = wire.TerminalOpen(command=command or [], cols=cols, rows=rows, env=env or {}, dir=dir)
        rid = new_id("to")
        fut: asyncio.Future[wire.Envelope] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        state: _TerminalState | None = None
        try:
            await self._send(wire.TERMINAL_OPEN, rid, req)
            reply = await asyncio.wait_for(fut, 60.0)
        finally:
            self._pending.pop(rid, None)
        _raise_if_error(reply)
        attached: wire.TerminalAttached = reply.payload()
        state = self._terminals.setdefault(attached.session, _TerminalState(attached.session))
        state.attached = attached
        return AsyncTerminal(self, state)

    async def terminal_attach(self, session: str) -> AsyncTerminal:
        """Attach to an existing PTY session (its screen comes in ``attached``)."""
        state = self._terminals.setdefault(session, _TerminalState(session))
        try:
            reply = await self._request(wire.TERMINAL_ATTACH, wire.TerminalRef(session=session))
        except BaseException:
            self._terminals.pop(session, None)
            raise
        state.attached = reply.payload()
        return AsyncTerminal(self, state)

    async def terminal_list(self) -> list[wire.TerminalInfo]:
        """The thread's PTY sessions."""
        reply = await self._request(wire.TERMINAL_LIST)
        sessions: wire.TerminalSessions = reply.payload()
        return sessions.sessions


class AsyncTerminal:
    """A PTY session this connection watches. Output arrives in :meth:`read`."""

    def __init__(self, session: AsyncSession, state: _TerminalState) -> None:
        self._s = session
        self._state = state
        self.id = state.session

    @property
    def attached(self) -> wire.TerminalAttached | None:
        """The last ``terminal_attached`` (command, size, screen)."""
        return self._state.attached

    @property
    def exit_code(self) -> int | None:
        """The exit code once ``terminal_exit`` arrived, else None."""
        return self._state.exit_code

    async def write(self, data: bytes | str) -> None:
        """Type bytes into the terminal (in frames of at most 64 KiB)."""
        raw = data.encode() if isinstance(data, str) else data
        ws = self._s._ws
        assert ws is not None
        for i in range(0, max(len(raw), 1), wire.MAX_FRAME_DATA):
            await ws.send(wire.encode_frame(wire.FRAME_INPUT, self.id, raw[i : i + wire.MAX_FRAME_DATA]))

    async def read(self, timeout: float | None = None) -> bytes:
        """The next output chunk; ``b""`` once the session exited or the
        connection ended."""
        chunk = await asyncio.wait_for(self._state.output.get(), timeout)
        if chunk is None:
            self._state.output.put_nowait(None)  # stay at the end
            return b""
        return chunk

    async def read_until(self, needle: bytes, timeout: float = 30.0) -> bytes:
        """Read until ``needle`` appears in the output; everything read so far."""

        async def until() -> bytes:
            buf = b""
            while needle not in buf:
                chunk = await self.read()
                if not chunk:
                    break
                buf += chunk
            return buf

        return await asyncio.wait_for(until(), timeout)

    async def resize(self, cols: int, rows: int) -> None:
        await self._s._checked(wire.TERMINAL_RESIZE, wire.TerminalResize(session=self.id, cols=cols, rows=rows))

    async def signal(self, sig: str) -> None:
        await self._s._checked(wire.TERMINAL_SIGNAL, wire.TerminalSignal(session=self.id, signal=sig))

    async def detach(self) -> None:
        await self._s._request(wire.TERMINAL_DETACH, wire.TerminalRef(session=self.id))
        self._s._terminals.pop(self.id, None)

    async def close(self) -> None:
        """End the session; watchers get ``terminal_exit``."""
        await self._s._request(wire.TERMINAL_CLOSE, wire.TerminalRef(session=self.id))
        self._s._terminals.pop(self.id, None)


async def _drain(sub: _Subscriber, last: str) -> AsyncIterator[wire.Envelope]:
    while True:
        item = await sub.queue.get()
        if isinstance(item, BaseException):
            raise item
        if not item.seq and item.type == wire.ERROR:  # an error reply to the request
            _raise_if_error(item)
        yield item
        if item.type == last:
            return


def _raise_if_error(env: wire.Envelope) -> None:
    if env.type == wire.ERROR:
        err: wire.Error = env.payload()
        raise error_for(err.code, err.message)
