"""A Deep Agents sandbox backend over a boxwire thread (extra ``boxwire[deepagents]``).

:class:`BoxwireSandbox` implements deepagents' ``SandboxBackendProtocol``:
``execute`` runs the agent's ``execute`` tool; ``ls``, ``read``, ``write``,
``edit``, ``glob`` and ``grep`` are the agent's own file tools, run directly
(``run_tool``) — no shell scripts; ``upload_files``/``download_files`` are the
bridge's file transfers. Every call passes the agent's ``sandbox_paths``
option, so absolute paths in the sandbox's ``/tmp`` work besides
``/workspace`` (still confined to the sandbox). Relative paths are refused
with ``invalid_path``.

:class:`BoxwireSandboxClient` creates, reconnects to and deletes such
sandboxes (one thread each).
"""

from __future__ import annotations

import base64
import posixpath
import re
from collections.abc import Coroutine
from datetime import datetime, timezone
from typing import Any, TypeVar

from deepagents.backends.protocol import (
    EditResult,
    ExecuteResponse,
    FileData,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    SandboxBackendProtocol,
    WriteResult,
)

from .errors import BoxwireError, NotFound
from .session import AsyncSession, ToolRunResult
from .sync import Client

__all__ = ["BoxwireSandbox", "BoxwireSandboxClient"]

T = TypeVar("T")

WORKSPACE = "/workspace"
MAX_BINARY_PREVIEW = 512000  # deepagents' preview limit for binary reads
MAX_READ_BYTES = 500 << 10  # a text page is cut near this size, as BaseSandbox does
MAX_TOOL_ARGS = 256 << 10  # a frame is at most 1 MiB, and JSON may escape each byte to six
TOOL_TIMEOUT = 300.0  # a file tool call answers long before this
FILE_ERRORS = frozenset({"file_not_found", "permission_denied", "is_directory", "invalid_path"})
_TRAILER = re.compile(r"lines (\d+)-(\d+) of (\d+)")
_GREP_LINE = re.compile(r"^(.*?):(\d+): (.*)$")
_REPLACED = re.compile(r"^replaced (\d+) occurrence")


class BoxwireSandbox(SandboxBackendProtocol):
    """A boxwire thread's sandbox as a Deep Agents backend.

    Safe for concurrent use from threads and from any event loop: every call
    runs on the client's own loop, over one WebSocket session opened on
    first use.
    """

    def __init__(self, client: Client, thread: str, *, owns_client: bool = False, timeout: int = 120) -> None:
        self._client = client
        self._thread = thread
        self._owns = owns_client
        self._timeout = timeout
        self._session: AsyncSession | None = None
        self._lock: Any = None

    @property
    def id(self) -> str:
        return self._thread

    @property
    def client(self) -> Client:
        return self._client

    def close(self) -> None:
        """Close the session (and the client when this backend made it)."""
        if self._session is not None:
            self._client.call(self._session.close())
            self._session = None
        if self._owns:
            self._client.close()

    def delete(self) -> None:  # type: ignore[override]
        """Delete the thread and its sandbox; idempotent."""
        try:
            self._client.delete_thread(self._thread)
        except NotFound:
            pass
        self.close()

    # Plumbing: sync calls block on the client's loop, async ones await it.

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._client.call(coro)

    async def _async(self, coro: Coroutine[Any, Any, T]) -> T:
        return await self._client.run_async(coro)

    async def _sess(self) -> AsyncSession:
        import asyncio

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._session is None:
                s = await self._client.aio.connect(self._thread)
                # This session only runs tools: resume from the log's end.
                self._session = s
            return self._session

    async def _tool(self, name: str, args: dict[str, Any], timeout: float | None = None) -> ToolRunResult:
        s = await self._sess()
        return await s.run_tool(name, {**args, "sandbox_paths": True}, timeout=timeout or TOOL_TIMEOUT)

    # execute

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        return self._sync(self._execute(command, timeout))

    async def aexecute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:  # noqa: ASYNC109
        return await self._async(self._execute(command, timeout))

    async def _execute(self, command: str, timeout: int | None) -> ExecuteResponse:
        args: dict[str, Any] = {"command": command}
        if timeout:
            args["timeout"] = timeout
        wait = (timeout or self._timeout) + 60.0
        r = (await self._tool("execute", args, timeout=wait)).result
        output, truncated = r.output, r.truncated
        if r.truncated and r.output_path:
            try:
                full = await self._client.aio.download_bytes(self._thread, r.output_path, sandbox_paths=True)
                output = full.decode("utf-8", errors="replace")
                truncated = len(full) < r.total_bytes
            except BoxwireError:
                pass
        if r.error:
            output = f"{output}\n{r.error}" if output else r.error
        return ExecuteResponse(output=output, exit_code=r.exit_code, truncated=truncated)

    # File transfers.

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return self._sync(self._upload(files))

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return await self._async(self._upload(files))

    async def _upload(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        out: list[FileUploadResponse] = []
        for path, content in files:
            if not path.startswith("/"):
                out.append(FileUploadResponse(path=path, error="invalid_path"))
                continue
            try:
                await self._client.aio.upload_bytes(self._thread, path, content, sandbox_paths=True)
                out.append(FileUploadResponse(path=path, error=None))
            except BoxwireError as e:
                out.append(FileUploadResponse(path=path, error=_file_error(e)))
        return out

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return self._sync(self._download(paths))

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return await self._async(self._download(paths))

    async def _download(self, paths: list[str]) -> list[FileDownloadResponse]:
        out: list[FileDownloadResponse] = []
        for path in paths:
            if not path.startswith("/"):
                out.append(FileDownloadResponse(path=path, content=None, error="invalid_path"))
                continue
            try:
                data = await self._client.aio.download_bytes(self._thread, path, sandbox_paths=True)
                out.append(FileDownloadResponse(path=path, content=data, error=None))
            except BoxwireError as e:
                out.append(FileDownloadResponse(path=path, content=None, error=_file_error(e)))
        return out

    # ls

    def ls(self, path: str) -> LsResult:
        return self._sync(self._ls(path))

    async def als(self, path: str) -> LsResult:
        return await self._async(self._ls(path))

    async def _ls(self, path: str) -> LsResult:
        if not path.startswith("/"):
            return LsResult(error=f"invalid_path: {path!r} is not an absolute path")
        r = (await self._tool("ls", {"path": path})).result
        if r.error:
            return LsResult(error=r.error)
        base = path.rstrip("/") or "/"
        entries: list[FileInfo] = []
        for line in r.output.split("\n"):
            parts = line.split("\t", 3)
            if len(parts) != 4:
                continue  # the trailer, or "(… is an empty directory)"
            kind, size, mtime, name = parts
            if kind == "link" and " -> " in name:
                name = name.split(" -> ", 1)[0]
            is_dir = kind == "dir"
            name = name.rstrip("/") if is_dir else name
            info: FileInfo = {"path": posixpath.join(base, name), "is_dir": is_dir}
            if size.isdigit():
                info["size"] = int(size)
            info["modified_at"] = _iso(mtime)
            entries.append(info)
        if (
            len(entries) == 1
            and not entries[0].get("is_dir")
            and posixpath.basename(base) == posixpath.basename(entries[0]["path"])
            and r.output.count("\n") == 0
        ):
            entries[0]["path"] = base  # ls of a file lists the file itself
        return LsResult(entries=entries)

    # read

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return self._sync(self._read(file_path, offset, limit))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        return await self._async(self._read(file_path, offset, limit))

    async def _read(self, path: str, offset: int, limit: int) -> ReadResult:
        if not path.startswith("/"):
            return ReadResult(error=f"invalid_path: {path!r} is not an absolute path")
        if limit <= 0:
            return ReadResult(file_data=FileData(content="", encoding="utf-8"), no_lines_requested=True)
        offset = max(offset, 0)
        lines: list[str] = []
        size, total, cur = 0, 0, offset
        while len(lines) < limit and size < MAX_READ_BYTES:
            r = (await self._tool("read_file", {"path": path, "offset": cur, "limit": limit - len(lines)})).result
            if r.error:
                if "binary file" in r.error:
                    return await self._read_binary(path)
                if lines:
                    break
                if "does not exist" in r.error:
                    return ReadResult(error=f"File '{path}' not found")
                return ReadResult(error=r.error)
            page, last, total = _parse_page(r.output)
            if total == 0:  # an empty file
                return ReadResult(file_data=FileData(content="", encoding="utf-8"))
            lines.extend(page)
            size += sum(len(x) + 1 for x in page)
            if last >= total or not page:
                break
            cur = last
        content = "\n".join(lines)
        end = offset + len(lines)
        if not lines:
            return ReadResult(file_data=FileData(content="", encoding="utf-8"))
        return ReadResult(
            file_data=FileData(content=content, encoding="utf-8"),
            start_line=offset + 1,
            end_line=end,
            total_lines=max(total, end),
            next_offset=end if end < total else None,
        )

    async def _read_binary(self, path: str) -> ReadResult:
        listing = await self._ls(path)
        size = listing.entries[0].get("size", 0) if listing.entries else 0
        if size > MAX_BINARY_PREVIEW:
            return ReadResult(error=f"File '{path}': Binary file exceeds maximum preview size of {MAX_BINARY_PREVIEW} bytes")
        try:
            data = await self._client.aio.download_bytes(self._thread, path, sandbox_paths=True)
        except BoxwireError as e:
            return ReadResult(error=f"File '{path}': {e}")
        if len(data) > MAX_BINARY_PREVIEW:
            return ReadResult(error=f"File '{path}': Binary file exceeds maximum preview size of {MAX_BINARY_PREVIEW} bytes")
        return ReadResult(file_data=FileData(content=base64.b64encode(data).decode("ascii"), encoding="base64"))

    # write and edit

    def write(self, file_path: str, content: str) -> WriteResult:
        return self._sync(self._write(file_path, content))

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        return await self._async(self._write(file_path, content))

    async def _write(self, path: str, content: str) -> WriteResult:
        if not path.startswith("/"):
            return WriteResult(error=f"invalid_path: {path!r} is not an absolute path")
        exists = (await self._tool("ls", {"path": path})).result
        if not exists.error:
            return WriteResult(
                error=f"Cannot write to {path} because it already exists. Read and then make an edit, or write to a new path."
            )
        data = content.encode("utf-8")
        if len(data) > MAX_TOOL_ARGS:  # past what one WebSocket frame carries: a file transfer
            up = await self._upload([(path, data)])
            if up[0].error:
                return WriteResult(error=f"Failed to write file '{path}': {up[0].error}")
            return WriteResult(path=path)
        r = (await self._tool("write_file", {"path": path, "content": content})).result
        if r.error:
            return WriteResult(error=f"Failed to write file '{path}': {r.error}")
        return WriteResult(path=path)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:  # noqa: FBT001, FBT002
        return self._sync(self._edit(file_path, old_string, new_string, replace_all))

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:  # noqa: FBT001, FBT002
        return await self._async(self._edit(file_path, old_string, new_string, replace_all))

    async def _edit(self, path: str, old: str, new: str, replace_all: bool) -> EditResult:
        if not path.startswith("/"):
            return EditResult(error=f"invalid_path: {path!r} is not an absolute path")
        r = (await self._tool("edit_file", {"path": path, "old": old, "new": new, "replace_all": replace_all})).result
        if r.error:
            err = r.error
            if "does not exist" in err:
                return EditResult(error=f"Error: File '{path}' not found")
            m = re.search(r"old matches (\d+) places", err)
            if m:
                return EditResult(
                    error=f"Error: String '{old}' appears multiple times ({m.group(1)}) in file '{path}'. Use replace_all=True to replace all instances, or provide a more specific string. ({err})"
                )
            if "old was not found" in err:
                return EditResult(error=f"Error: String not found in file '{path}': {old!r} ({err})")
            return EditResult(error=err)
        m = _REPLACED.match(r.output)
        return EditResult(path=path, occurrences=int(m.group(1)) if m else 1)

    # glob and grep

    def glob(self, pattern: str, path: str | None = None) -> GlobResult:
        return self._sync(self._glob(pattern, path))

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        return await self._async(self._glob(pattern, path))

    async def _glob(self, pattern: str, path: str | None) -> GlobResult:
        base = path or WORKSPACE
        if not base.startswith("/"):
            return GlobResult(error=f"invalid_path: {base!r} is not an absolute path")
        r = (await self._tool("glob", {"pattern": pattern, "path": base})).result
        if r.error:
            return GlobResult(error=f"Path '{base}': {r.error}")
        matches: list[FileInfo] = []
        for line in r.output.split("\n"):
            if not line or line.startswith("[") or line.startswith("no paths match "):
                continue
            is_dir = line.endswith("/")
            matches.append({"path": line.rstrip("/") if is_dir else line, "is_dir": is_dir})
        return GlobResult(matches=matches, truncated=r.truncated, truncation_reason="budget" if r.truncated else None)

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None) -> GrepResult:
        return self._sync(self._grep(pattern, path, glob, max_count))

    async def agrep(self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None) -> GrepResult:
        return await self._async(self._grep(pattern, path, glob, max_count))

    async def _grep(self, pattern: str, path: str | None, glob: str | None, max_count: int | None) -> GrepResult:
        base = (path or WORKSPACE).rstrip("/") or "/"
        if not base.startswith("/"):
            return GrepResult(error=f"invalid_path: {base!r} is not an absolute path")
        args: dict[str, Any] = {"pattern": pattern, "path": base, "mode": "content", "max_results": max_count or 2000}
        if glob:
            args["glob"] = glob
        r = (await self._tool("grep", args)).result
        if r.error:
            return GrepResult(error=r.error)
        matches: list[GrepMatch] = []
        for line in r.output.split("\n"):
            m = _GREP_LINE.match(line)
            if m is None or line.startswith("["):
                continue
            rel = m.group(1)
            full = (
                base if rel == posixpath.basename(base) and "/" not in rel and not await self._is_dir(base) else posixpath.join(base, rel)
            )
            matches.append({"path": full, "line": int(m.group(2)), "text": m.group(3)})
        return GrepResult(matches=matches, truncated=r.truncated)

    async def _is_dir(self, path: str) -> bool:
        r = (await self._tool("ls", {"path": path})).result
        return not r.error and "\t" in r.output and (r.output.count("\n") > 0 or r.output.startswith("dir\t"))


class BoxwireSandboxClient:
    """Creates and finds boxwire sandboxes for Deep Agents.

    Without arguments it reads ``BOXWIRE_URL`` and ``BOXWIRE_TOKEN``.
    ``create`` makes a new thread (sandbox); ``get(sandbox_id=…)`` reconnects
    to an existing one without creating anything (:class:`NotFound` when it
    does not exist); ``delete`` is idempotent. Each has an async form.
    """

    def __init__(self, url: str | None = None, token: str | None = None, **create_defaults: Any) -> None:
        self._client = Client(url, token)
        self._defaults = create_defaults

    @property
    def client(self) -> Client:
        return self._client

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> BoxwireSandboxClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create(self, **kw: Any) -> BoxwireSandbox:
        """A new sandbox (a new thread). Keyword arguments as for POST /v1/threads."""
        info = self._client.create_thread(**{**self._defaults, **kw})
        return BoxwireSandbox(self._client, info.id)

    def get(self, *, sandbox_id: str) -> BoxwireSandbox:
        """The existing sandbox ``sandbox_id``; raises NotFound, never creates."""
        self._client.get_thread(sandbox_id)
        return BoxwireSandbox(self._client, sandbox_id)

    def delete(self, *, sandbox_id: str) -> None:
        """Delete a sandbox; nothing happens when it does not exist."""
        try:
            self._client.delete_thread(sandbox_id)
        except NotFound:
            pass

    async def acreate(self, **kw: Any) -> BoxwireSandbox:
        info = await self._client.run_async(self._client.aio.create_thread(**{**self._defaults, **kw}))
        return BoxwireSandbox(self._client, info.id)

    async def aget(self, *, sandbox_id: str) -> BoxwireSandbox:
        await self._client.run_async(self._client.aio.get_thread(sandbox_id))
        return BoxwireSandbox(self._client, sandbox_id)

    async def adelete(self, *, sandbox_id: str) -> None:
        try:
            await self._client.run_async(self._client.aio.delete_thread(sandbox_id))
        except NotFound:
            pass


def _file_error(e: BoxwireError) -> str:
    return e.code if e.code in FILE_ERRORS else (e.code or str(e))


def _iso(mtime: str) -> str:
    try:
        return datetime.strptime(mtime, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).isoformat()
    except ValueError:
        return mtime


def _parse_page(output: str) -> tuple[list[str], int, int]:
    """The lines of one read_file page, the last line number shown and the
    file's line count (0 for an empty file)."""
    if output.startswith("(") and output.endswith(" is empty)"):
        return [], 0, 0
    body, sep, trailer = output.rpartition("\n[")
    m = _TRAILER.search(trailer)
    if not sep or m is None:
        return [], 0, 0
    lines: list[str] = []
    numbers: list[str] = []
    for row in body.split("\n"):
        if "\t" not in row:
            continue
        num, text = row.split("\t", 1)
        n = num.split(".", 1)[0]
        if not n.isdigit():
            continue
        if text.startswith("... [line cut: "):
            continue
        if numbers and numbers[-1] == n and "." in num and not num.endswith(".1"):
            lines[-1] += text
        else:
            numbers.append(n)
            lines.append(text)
    return lines, int(m.group(2)), int(m.group(3))
