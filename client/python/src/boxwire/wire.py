"""The boxwire wire protocol, version 1 (docs/protocol.md).

Mirrors the Go package ``bridge/wire``: the :class:`Envelope` of every JSON
text frame, one dataclass per payload, the message type and error code
constants, and the binary terminal frame. ``tests/test_golden.py`` decodes
and re-encodes every golden file of ``bridge/wire/testdata`` with these
types, so a protocol change this module does not follow fails there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from ._codec import JSON, ProtocolError, always, from_dict, named, to_dict

__all__ = [
    "VERSION",
    "WS_PATH",
    "Envelope",
    "ProtocolError",
    "decode_payload",
    "encode_frame",
    "parse_frame",
    "PAYLOADS",
]

VERSION: Final = 1
WS_PATH: Final = "/v1/ws"
MAX_MESSAGE_BYTES: Final = 1 << 20

# Message types.
HELLO: Final = "hello"
USER_MESSAGE: Final = "user_message"
INTERRUPT: Final = "interrupt"
PING: Final = "ping"
PONG: Final = "pong"
USER_ECHO: Final = "user_echo"
ASSISTANT_DELTA: Final = "assistant_delta"
ASSISTANT_MESSAGE: Final = "assistant_message"
TOOL_CALL: Final = "tool_call"
TOOL_OUTPUT: Final = "tool_output"
TOOL_RESULT: Final = "tool_result"
TURN_DONE: Final = "turn_done"
ERROR: Final = "error"
RUN_TOOL: Final = "run_tool"
APPROVE: Final = "approve"
DENY: Final = "deny"
APPROVAL_REQUEST: Final = "approval_request"
APPROVAL_DECISION: Final = "approval_decision"
TOOL_CHECK: Final = "tool_check"
TOOL_VERDICT: Final = "tool_verdict"
HISTORY: Final = "history"
RESUME: Final = "resume"
RESUMED: Final = "resumed"
ACCEPTED: Final = "accepted"
EVENTS_LOST: Final = "events_lost"
CLAIM: Final = "claim"
CLAIMED: Final = "claimed"
USAGE: Final = "usage"
EGRESS: Final = "egress"
EGRESS_RULES: Final = "egress_rules"
SANDBOX_EXITED: Final = "sandbox_exited"
SANDBOX_REPLACED: Final = "sandbox_replaced"
TERMINAL_OPEN: Final = "terminal_open"
TERMINAL_ATTACH: Final = "terminal_attach"
TERMINAL_ATTACHED: Final = "terminal_attached"
TERMINAL_DETACH: Final = "terminal_detach"
TERMINAL_DETACHED: Final = "terminal_detached"
TERMINAL_RESIZE: Final = "terminal_resize"
TERMINAL_SIGNAL: Final = "terminal_signal"
TERMINAL_CLOSE: Final = "terminal_close"
TERMINAL_CLOSED: Final = "terminal_closed"
TERMINAL_EXIT: Final = "terminal_exit"
TERMINAL_LIST: Final = "terminal_list"
TERMINAL_SESSIONS: Final = "terminal_sessions"
PORT_OPEN: Final = "port_open"
PORT_OPENED: Final = "port_opened"
STREAM_CLOSE: Final = "stream_close"
PORT_LIST: Final = "port_list"
PORTS: Final = "ports"
HOST_TOOLS_LIST: Final = "host_tools_list"
HOST_TOOLS: Final = "host_tools"
HOST_CALL: Final = "host_call"
HOST_PROGRESS: Final = "host_progress"
HOST_RESULT: Final = "host_result"
HOST_CANCEL: Final = "host_cancel"

# tool_result statuses and turn_done reasons.
STATUS_EXITED: Final = "exited"
STATUS_TIMED_OUT: Final = "timed_out"
STATUS_INTERRUPTED: Final = "interrupted"
STATUS_AWAITING_INPUT: Final = "awaiting_input"
STATUS_BACKGROUND: Final = "background"
STATUS_KILLED: Final = "killed"
STATUS_OOM_KILLED: Final = "oom_killed"
STATUS_SANDBOX_LOST: Final = "sandbox_lost"
REASON_STOP: Final = "stop"
REASON_INTERRUPTED: Final = "interrupted"
REASON_ERROR: Final = "error"
REASON_STEP_LIMIT: Final = "step_limit"
REASON_SANDBOX_LOST: Final = "sandbox_lost"


@dataclass
class Envelope:
    """One JSON text frame. ``data`` is the payload as decoded JSON."""

    type: str
    thread: str = ""
    seq: int = 0
    id: str = ""
    data: JSON = None

    @property
    def is_event(self) -> bool:
        """Events carry a seq; requests and replies do not."""
        return self.seq > 0

    def payload(self) -> Any:
        """The payload decoded into its dataclass (None for types without one)."""
        return decode_payload(self.type, self.data)

    def to_json(self) -> str:
        """The frame's text."""
        return json.dumps(to_dict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        """Parse a frame's text (strict: unknown envelope fields raise)."""
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise ProtocolError(f"frame is not JSON: {e}") from None
        env = from_dict(cls, obj)
        if not env.type:
            raise ProtocolError("frame has no type")
        return env


# Payloads, in the order of docs/protocol.md.


@dataclass
class Posture:
    uid: int
    gid: int
    cap_eff: str
    cap_bnd: str
    no_new_privs: bool
    seccomp: int
    read_only_root: bool
    pids_max: int
    memory_max_bytes: int
    cpu_quota: float = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class Hello:
    version: int
    role: str
    software: str = ""
    thread: str = ""
    after_seq: int = 0
    posture: Posture | None = None
    instance: str = ""
    agent_hash: str = ""
    host_tools: bool = False


@dataclass
class UserMessage:
    text: str


@dataclass
class Text:
    text: str


@dataclass
class ToolCall:
    call_id: str
    name: str
    arguments: JSON


@dataclass
class ToolOutput:
    call_id: str
    output: str


@dataclass
class ToolResult:
    call_id: str
    name: str
    output: str
    truncated: bool
    status: str = ""
    exit_code: int | None = None
    job_id: str = ""
    total_bytes: int = 0
    total_lines: int = 0
    output_path: str = ""
    cwd: str = ""
    error: str = ""


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass
class TurnDone:
    reason: str
    usage: Usage | None = None


@dataclass
class Error:
    code: str
    message: str


@dataclass
class RunTool:
    name: str
    arguments: JSON


@dataclass
class ApprovalAnswer:
    approval_id: str
    reason: str = ""


@dataclass
class ApprovalRequest:
    approval_id: str
    kind: str
    expires: str
    tool: str = ""
    call_id: str = ""
    arguments: JSON = None
    method: str = ""
    host: str = ""
    port: int = 0
    url: str = ""
    credential: str = ""
    rule: str = ""
    reason: str = ""


@dataclass
class ApprovalDecision:
    kind: str
    verdict: str
    by: str
    at: str
    approval_id: str = ""
    tool: str = ""
    call_id: str = ""
    arguments: JSON = None
    method: str = ""
    host: str = ""
    port: int = 0
    url: str = ""
    credential: str = ""
    rule: str = ""
    reason: str = ""


@dataclass
class ToolCheck:
    call_id: str
    name: str
    arguments: JSON


@dataclass
class ToolVerdict:
    allowed: bool
    reason: str = ""


@dataclass
class History:
    events: list[Envelope]
    more: bool = False


@dataclass
class Resume:
    after: int
    instance: str = ""


@dataclass
class Resumed:
    instance: str
    after: int
    replayed: int
    seq: int = 0
    busy: bool = False
    turn: bool = False
    calls: list[str] = field(default_factory=list)


@dataclass
class EventsLost:
    from_: int = named("from")
    to: int = always(0)
    count: int = always(0)
    message: str = always("")
    instance: str = ""


@dataclass
class Claim:
    llm_token: str


@dataclass
class UsageReport:
    model: str
    call: Usage
    total: Usage
    requests: int
    token_budget: int = 0


@dataclass
class EgressDecision:
    method: str
    host: str
    allowed: bool
    port: int = 0
    rule: str = ""
    reason: str = ""


@dataclass
class EgressRules:
    rules: list[str]
    by: str
    previous: list[str] = field(default_factory=list)


@dataclass
class SandboxExited:
    reason: str
    message: str
    exit_code: int | None = None
    oom_killed: bool = False


@dataclass
class SandboxReplaced:
    reason: str
    sandbox_id: str
    restored: int
    message: str


@dataclass
class TerminalOpen:
    command: list[str] = field(default_factory=list)
    cols: int = 0
    rows: int = 0
    env: dict[str, str] = field(default_factory=dict)
    dir: str = ""


@dataclass
class TerminalRef:
    session: str


@dataclass
class TerminalInfo:
    session: str
    command: list[str]
    cols: int
    rows: int
    watchers: int
    exited: bool = False
    exit_code: int | None = None


@dataclass
class TerminalAttached:
    session: str
    command: list[str]
    cols: int
    rows: int
    watchers: int
    screen: str
    exited: bool = False
    exit_code: int | None = None


@dataclass
class TerminalDetached:
    session: str
    reason: str


@dataclass
class TerminalResize:
    session: str
    cols: int
    rows: int


@dataclass
class TerminalSignal:
    session: str
    signal: str


@dataclass
class TerminalExit:
    session: str
    exit_code: int


@dataclass
class TerminalSessions:
    sessions: list[TerminalInfo]


@dataclass
class StreamLimits:
    data: int
    window: int


@dataclass
class PortOpen:
    stream: str
    port: int
    limits: StreamLimits | None = None


@dataclass
class StreamRef:
    stream: str
    limits: StreamLimits | None = None


@dataclass
class StreamClose:
    stream: str
    code: str = ""
    message: str = ""


@dataclass
class Port:
    port: int
    address: str


@dataclass
class Ports:
    """What listens in the sandbox: the ``ports`` event, and the reply to
    ``port_list`` (docs/preview.md)."""

    ports: list[Port]


@dataclass
class HostTool:
    """A tool the bridge runs on the host for the agent (docs/tools.md)."""

    name: str
    input_schema: JSON
    description: str = ""


@dataclass
class MCPServer:
    """An MCP server the agent runs inside the sandbox (docs/tools.md)."""

    name: str
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    dir: str = ""
    prefix: str = ""
    tools: list[str] = field(default_factory=list)
    timeout: str = ""


@dataclass
class HostTools:
    tools: list[HostTool]
    errors: list[str] = field(default_factory=list)
    mcp_servers: list[MCPServer] = field(default_factory=list)


@dataclass
class HostCall:
    call_id: str
    name: str
    arguments: JSON


@dataclass
class HostProgress:
    message: str


@dataclass
class HostResult:
    output: str = ""
    error: str = ""
    redacted: int = 0


PAYLOADS: Final[dict[str, type | None]] = {
    HELLO: Hello,
    USER_MESSAGE: UserMessage,
    USER_ECHO: UserMessage,
    INTERRUPT: None,
    PING: None,
    PONG: None,
    ASSISTANT_DELTA: Text,
    ASSISTANT_MESSAGE: Text,
    TOOL_CALL: ToolCall,
    TOOL_OUTPUT: ToolOutput,
    TOOL_RESULT: ToolResult,
    TURN_DONE: TurnDone,
    ERROR: Error,
    RUN_TOOL: RunTool,
    APPROVE: ApprovalAnswer,
    DENY: ApprovalAnswer,
    APPROVAL_REQUEST: ApprovalRequest,
    APPROVAL_DECISION: ApprovalDecision,
    TOOL_CHECK: ToolCheck,
    TOOL_VERDICT: ToolVerdict,
    HISTORY: History,
    RESUME: Resume,
    RESUMED: Resumed,
    ACCEPTED: None,
    EVENTS_LOST: EventsLost,
    CLAIM: Claim,
    CLAIMED: None,
    USAGE: UsageReport,
    EGRESS: EgressDecision,
    EGRESS_RULES: EgressRules,
    SANDBOX_EXITED: SandboxExited,
    SANDBOX_REPLACED: SandboxReplaced,
    TERMINAL_OPEN: TerminalOpen,
    TERMINAL_ATTACH: TerminalRef,
    TERMINAL_ATTACHED: TerminalAttached,
    TERMINAL_DETACH: TerminalRef,
    TERMINAL_DETACHED: TerminalDetached,
    TERMINAL_RESIZE: TerminalResize,
    TERMINAL_SIGNAL: TerminalSignal,
    TERMINAL_CLOSE: TerminalRef,
    TERMINAL_CLOSED: TerminalRef,
    TERMINAL_EXIT: TerminalExit,
    TERMINAL_LIST: None,
    TERMINAL_SESSIONS: TerminalSessions,
    PORT_OPEN: PortOpen,
    PORT_OPENED: StreamRef,
    STREAM_CLOSE: StreamClose,
    PORT_LIST: None,
    PORTS: Ports,
    HOST_TOOLS_LIST: None,
    HOST_TOOLS: HostTools,
    HOST_CALL: HostCall,
    HOST_PROGRESS: HostProgress,
    HOST_RESULT: HostResult,
    HOST_CANCEL: None,
}
"""Every message type of protocol version 1 and its payload class."""


def decode_payload(typ: str, data: JSON) -> Any:
    """Decode ``data`` into the payload class of ``typ``.

    Raises :class:`ProtocolError` for an unknown type, a payload that does
    not fit, or data on a type that has none.
    """
    if typ not in PAYLOADS:
        raise ProtocolError(f"unknown message type {typ!r}")
    cls = PAYLOADS[typ]
    if cls is None:
        if data is not None:
            raise ProtocolError(f"{typ} carries no payload")
        return None
    return from_dict(cls, data, typ)


def encode_payload(payload: Any) -> JSON:
    """Encode a payload dataclass as JSON data (None stays None)."""
    return None if payload is None else to_dict(payload)


# Binary terminal frames (docs/terminal.md).
FRAME_VERSION: Final = 1
FRAME_OUTPUT: Final = 1
FRAME_INPUT: Final = 2
MAX_FRAME_DATA: Final = 64 << 10


def encode_frame(kind: int, session: str, data: bytes) -> bytes:
    """A binary terminal frame: version and kind, session id, raw bytes."""
    sid = session.encode()
    if not 1 <= len(sid) <= 255:
        raise ValueError("session id must be 1-255 bytes")
    if len(data) > MAX_FRAME_DATA:
        raise ValueError("terminal frame data over 64 KiB")
    return bytes([(FRAME_VERSION << 4) | kind, len(sid)]) + sid + data


def parse_frame(frame: bytes) -> tuple[int, str, bytes]:
    """Split a binary terminal frame into (kind, session, data)."""
    if len(frame) < 3 or frame[0] >> 4 != FRAME_VERSION:
        raise ProtocolError("not a terminal frame")
    n = frame[1]
    if n == 0 or len(frame) < 2 + n:
        raise ProtocolError("terminal frame: bad session id length")
    return frame[0] & 0x0F, frame[2 : 2 + n].decode(), frame[2 + n :]


# Bodies of the HTTP API (bridge/wire/lifecycle.go, files.go). They are
# decoded leniently: a field a newer bridge adds is ignored.


@dataclass
class ThreadInfo:
    id: str
    scope: str
    image: str
    status: str
    sandbox_id: str
    created: str
    expires: str
    idle_expires: str
    clients: int
    assistant: str = ""
    runtime: str = ""
    egress: list[str] = field(default_factory=list)
    image_id: str = ""
    agent_version: str = ""
    agent_hash: str = ""
    suspended: str | None = None
    owner: str = ""
    posture: Posture | None = None
    relay: str = ""


@dataclass
class ImageList:
    """GET /v1/images: the images a thread may ask for, the default first."""

    default: str
    images: list[str]


@dataclass
class FileResult:
    path: str
    size: int = 0
    code: str = ""
    message: str = ""


@dataclass
class TransferResult:
    files: list[FileResult] = field(default_factory=list)
    count: int = 0
    bytes: int = 0
    failed: int = 0
