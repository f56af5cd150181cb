"""Every API call of the SDK on a real bridge, and the documented exceptions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import boxwire
from boxwire import AsyncClient, Client, wire

from .conftest import Bridge


@pytest.fixture
async def aio(bridge: Bridge) -> AsyncClient:
    return AsyncClient(bridge.url, bridge.token)


def test_env_config_and_redaction(bridge_env: Bridge) -> None:
    with Client() as c:
        assert c.url == bridge_env.url
        assert bridge_env.token not in repr(c)
        assert isinstance(c.list_threads(), list)


def test_threads_sync(bridge: Bridge) -> None:
    with Client(bridge.url, bridge.token) as c:
        info = c.create_thread(ttl="10m")
        assert info.status == "running" and info.id.startswith("t_")
        assert c.get_thread(info.id).id == info.id
        assert info.id in [t.id for t in c.list_threads()]
        c.delete_thread(info.id)
        with pytest.raises(boxwire.NotFound):
            c.get_thread(info.id)
        with pytest.raises(boxwire.NotFound):
            c.delete_thread(info.id)


def test_bad_input_raises(bridge: Bridge, tmp_path: Path) -> None:
    with pytest.raises(boxwire.Unauthorized):
        Client(bridge.url, "wrong-token").list_threads()
    with Client(bridge.url, bridge.token) as c:
        with pytest.raises(boxwire.NotFound):
            c.connect("t_000000000000")
        with pytest.raises(boxwire.NotAllowed):
            c.create_thread(image="not-allowed:latest")
        with pytest.raises(boxwire.BadMessage, match="command: the program is missing"):
            c.create_thread(mcp={"servers": [{"name": "docs", "command": []}]})
        with pytest.raises(boxwire.Unauthorized):
            Client(bridge.url, "wrong-token").connect()
        t = c.create_thread()
        try:
            with pytest.raises(boxwire.InvalidPath):
                c.upload_bytes(t.id, "../outside.txt", b"x")
            with pytest.raises(boxwire.InvalidPath):
                c.download_bytes(t.id, "/etc/passwd")
            with pytest.raises(boxwire.FileNotFound):
                c.download_bytes(t.id, "missing.txt")
            with pytest.raises(boxwire.TooLarge):
                c.upload_bytes(t.id, "big.bin", b"\0" * ((16 << 20) + 1))
            with c.connect(t.id) as s, pytest.raises(boxwire.NotFound):
                s.approve("ap_doesnotexist")
        finally:
            c.delete_thread(t.id)


async def test_chat_and_tools_async(aio: AsyncClient) -> None:
    t = await aio.create_thread()
    try:
        s = await aio.connect(t.id)
        events, done = await s.chat("please write hello")
        types = [e.type for e in events]
        assert types[0] == wire.USER_ECHO and types[-1] == wire.TURN_DONE
        assert wire.TOOL_CALL in types and wire.TOOL_RESULT in types
        assert done.reason == wire.REASON_STOP
        seqs = [e.seq for e in events]
        assert seqs == sorted(seqs)

        r = await s.run_tool("execute", {"command": "cat /workspace/x; exit 3"})
        assert r.result.exit_code == 3 and "hello" in r.result.output
        r = await s.run_tool("read_file", {"path": "x"})
        assert "1\thello" in r.result.output
        r = await s.run_tool("no_such_tool", {})
        assert r.result.error
        await s.ping()

        # interrupt: a long command ends with status interrupted.
        run = asyncio.ensure_future(s.run_tool("execute", {"command": "sleep 60"}))
        await asyncio.sleep(1.0)
        await s.interrupt()
        res = await asyncio.wait_for(run, 30)
        assert res.result.status == wire.STATUS_INTERRUPTED

        # busy: a second message while a turn runs.
        turn = s.send("slow please")
        first = await turn.__anext__()
        assert first.type == wire.USER_ECHO
        with pytest.raises(boxwire.Busy):
            async for _ in s.send("another"):
                pass
        await s.interrupt()
        rest = [e async for e in turn]
        assert rest[-1].payload().reason == wire.REASON_INTERRUPTED
        await s.close()
    finally:
        await aio.delete_thread(t.id)
        await aio.aclose()


async def test_resume_after_drop_no_gaps(aio: AsyncClient) -> None:
    t = await aio.create_thread()
    try:
        s = await aio.connect(t.id)
        await s.chat("hi")
        seen = s.last_seq
        events: list[wire.Envelope] = []
        turn = s.send("please write hello")
        events.append(await turn.__anext__())
        assert s._ws is not None
        s._ws.transport.abort()  # the network drops mid-turn; the session resumes by cursor
        events += [e async for e in turn]
        assert events[-1].type == wire.TURN_DONE
        seqs = [e.seq for e in events]
        assert seqs == list(range(seen + 1, seen + 1 + len(seqs)))
        await s.close()

        # A new connection from a cursor gets exactly what followed it.
        s2 = await aio.connect(t.id, after_seq=seen)
        got: list[int] = []

        async def collect() -> None:
            async for e in s2.events():
                got.append(e.seq)
                if e.type == wire.TURN_DONE:
                    return

        await asyncio.wait_for(collect(), 30)
        assert got == seqs
        await s2.close()
        log = await aio.transcript(t.id)
        assert [e.seq for e in log] == list(range(1, len(log) + 1))
    finally:
        await aio.delete_thread(t.id)
        await aio.aclose()


def test_files_and_terminal_sync(bridge: Bridge, tmp_path: Path) -> None:
    src = tmp_path / "proj"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)))
    with Client(bridge.url, bridge.token) as c:
        t = c.create_thread()
        try:
            res = c.upload(t.id, src, "in")
            assert res.failed == 0 and res.count >= 3
            assert c.download_bytes(t.id, "in/proj/sub/b.bin") == bytes(range(256))
            c.upload_bytes(t.id, "/workspace/raw.txt", b"raw")
            assert c.download_bytes(t.id, "raw.txt") == b"raw"
            out = tmp_path / "out"
            c.download(t.id, "in/proj", out)
            assert (out / "proj" / "a.txt").read_text() == "alpha"
            assert (out / "proj" / "sub" / "b.bin").read_bytes() == bytes(range(256))

            with c.connect(t.id) as s:
                term = s.terminal_open(["/bin/bash", "--norc"], cols=100, rows=30)
                assert term.attached is not None and term.attached.cols == 100
                term.write("echo term-$((40+2))\n")
                assert b"term-42" in term.read_until(b"term-42")
                term.resize(120, 40)
                assert any(i.session == term.id for i in s.terminal_list())
                term.signal("INT")
                term.write("exit 7\n")
                while term.read(timeout=30):
                    pass
                assert term.exit_code == 7
                term.close()
                with pytest.raises(boxwire.NotFound):
                    s.terminal_attach("term_nope")
        finally:
            c.delete_thread(t.id)
