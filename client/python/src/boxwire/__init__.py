"""boxwire: Python SDK for the boxwire bridge (docs/protocol.md).

``AsyncClient``/``AsyncSession`` are the asyncio API; ``Client``/``Session``
their synchronous twins. Errors are the exceptions of :mod:`boxwire.errors`,
named after the protocol's error codes. The Deep Agents backend is in
:mod:`boxwire.deepagents` (extra ``boxwire[deepagents]``).
"""

from . import errors, wire
from .client import AsyncClient
from .errors import *  # noqa: F403
from .session import AsyncSession, AsyncTerminal, ToolRunResult
from .sync import Client, Session, Terminal

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncSession",
    "AsyncTerminal",
    "Client",
    "Session",
    "Terminal",
    "ToolRunResult",
    "errors",
    "wire",
    *errors.__all__,
]
