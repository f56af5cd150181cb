// The payload of every message type, as bridge/wire defines it
// (docs/protocol.md). Field names and optionality follow the Go structs'
// JSON tags: opt(...) is omitempty.

import { arr, bool, json, merge, num, obj, object, oneOf, opt, record, str, type TypeOf } from "./codec.js";

/** What an agent found about its confinement (wire.Posture): in its hello, and in thread info. */
export const Posture = obj({
  uid: num,
  gid: num,
  cap_eff: str,
  cap_bnd: str,
  no_new_privs: bool,
  seccomp: num,
  read_only_root: bool,
  pids_max: num,
  memory_max_bytes: num,
  cpu_quota: opt(num),
  errors: opt(arr(str)),
});

export const Hello = obj({
  version: num,
  role: oneOf("client", "bridge", "agent"),
  software: opt(str),
  thread: opt(str),
  after_seq: opt(num),
  posture: opt(Posture),
  instance: opt(str),
  agent_hash: opt(str),
  host_tools: opt(bool),
});

export const Text = obj({ text: str });

export const ToolCall = obj({ call_id: str, name: str, arguments: json });

export const ToolOutput = obj({ call_id: str, output: str });

/** Statuses of a command in ToolResult.status. */
export type ToolStatus = "exited" | "timed_out" | "interrupted" | "awaiting_input" | "background" | "killed" | "oom_killed" | "sandbox_lost";

export const ToolResult = obj({
  call_id: str,
  name: str,
  status: opt(oneOf<ToolStatus>()),
  exit_code: opt(num),
  job_id: opt(str),
  output: str,
  truncated: bool,
  total_bytes: opt(num),
  total_lines: opt(num),
  output_path: opt(str),
  cwd: opt(str),
  error: opt(str),
});

export const Usage = obj({ prompt_tokens: num, completion_tokens: num, total_tokens: num });

/** Reasons a turn ends, in TurnDone.reason. */
export type TurnReason = "stop" | "interrupted" | "error" | "step_limit" | "sandbox_lost";

export const TurnDone = obj({ reason: oneOf<TurnReason>(), usage: opt(Usage) });

export const ErrorPayload = obj({ code: str, message: str });

export const RunTool = obj({ name: str, arguments: json });

const approvalAction = {
  kind: oneOf("tool", "egress", "credential"),
  tool: opt(str),
  call_id: opt(str),
  arguments: opt(json),
  method: opt(str),
  host: opt(str),
  port: opt(num),
  url: opt(str),
  credential: opt(str),
};

export const ApprovalRequest = obj(
  merge({ approval_id: str }, merge(approvalAction, { rule: opt(str), reason: opt(str), expires: str })),
);

export const ApprovalDecision = obj(
  merge(
    { approval_id: opt(str) },
    merge(approvalAction, { verdict: oneOf("approved", "denied"), by: str, at: str, rule: opt(str), reason: opt(str) }),
  ),
);

export const ApprovalAnswer = obj({ approval_id: str, reason: opt(str) });

export const ToolCheck = obj({ call_id: str, name: str, arguments: json });

export const ToolVerdict = obj({ allowed: bool, reason: opt(str) });

export const UsageReport = obj({ model: str, call: Usage, total: Usage, requests: num, token_budget: opt(num) });

export const EgressDecision = obj({
  method: str,
  host: str,
  port: opt(num),
  allowed: bool,
  rule: opt(str),
  reason: opt(str),
});

export const EgressRules = obj({ rules: arr(str), previous: opt(arr(str)), by: str });

/** Why a sandbox stopped. */
export type ExitReason = "exited" | "oom" | "idle_timeout" | "max_lifetime" | "image_update";

export const SandboxExited = obj({
  reason: oneOf<ExitReason>(),
  exit_code: opt(num),
  oom_killed: opt(bool),
  message: str,
});

export const SandboxReplaced = obj({ reason: oneOf<ExitReason>(), sandbox_id: str, restored: num, message: str });

export const Resume = obj({ instance: opt(str), after: num });

export const Resumed = obj({
  instance: str,
  after: num,
  replayed: num,
  seq: opt(num),
  busy: opt(bool),
  turn: opt(bool),
  calls: opt(arr(str)),
});

export const EventsLost = obj({ instance: opt(str), from: num, to: num, count: num, message: str });

export const Claim = obj({ llm_token: str });

export const TerminalOpen = obj({
  command: opt(arr(str)),
  cols: opt(num),
  rows: opt(num),
  env: opt(record(str)),
  dir: opt(str),
});

export const TerminalRef = obj({ session: str });

export const TerminalResize = obj({ session: str, cols: num, rows: num });

export const TerminalSignal = obj({ session: str, signal: str });

const terminalInfo = {
  session: str,
  command: arr(str),
  cols: num,
  rows: num,
  watchers: num,
  exited: opt(bool),
  exit_code: opt(num),
};

export const TerminalInfo = obj(terminalInfo);

export const TerminalAttached = obj(merge(terminalInfo, { screen: str }));

export const TerminalDetached = obj({ session: str, reason: oneOf("detached", "too_slow") });

export const TerminalExit = obj({ session: str, exit_code: num });

export const TerminalSessions = obj({ sessions: arr(TerminalInfo) });

/** Port streams between a bridge and its agent (docs/protocol.md, Ports and streams). */
export const StreamLimits = obj({ data: num, window: num });

export const PortOpen = obj({ stream: str, port: num, limits: opt(StreamLimits) });

export const StreamRef = obj({ stream: str, limits: opt(StreamLimits) });

export const StreamClose = obj({ stream: str, code: opt(str), message: opt(str) });

export const Port = obj({ port: num, address: str });

/** What listens in the sandbox: the ports event, and port_list's answer. */
export const Ports = obj({ ports: arr(Port) });

/** Host tools between an agent and its bridge (docs/tools.md, Host tools). */
export const HostTool = obj({ name: str, description: opt(str), input_schema: json });

/** An MCP server the agent runs inside the sandbox (the schema of /etc/boxwire/mcp.json; docs/tools.md). */
export const MCPServer = obj({
  name: str,
  command: arr(str),
  env: opt(record(str)),
  dir: opt(str),
  prefix: opt(str),
  tools: opt(arr(str)),
  timeout: opt(str),
});

/** An MCP servers declaration: an image's /etc/boxwire/mcp.json, a thread's CreateThread.mcp. */
export const MCPServers = obj({ servers: arr(MCPServer) });

export const HostTools = obj({ tools: arr(HostTool), errors: opt(arr(str)), mcp_servers: opt(arr(MCPServer)) });

export const HostCall = obj({ call_id: str, name: str, arguments: json });

export const HostProgress = obj({ message: str });

export const HostResult = obj({ output: opt(str), error: opt(str), redacted: opt(num) });

/** The threads API: POST /v1/threads (docs/lifecycle.md). */
export const CreateThread = obj({
  image: opt(str),
  runtime: opt(str),
  scope: opt(oneOf("thread", "assistant")),
  assistant: opt(str),
  ttl: opt(str),
  policy: opt(object),
  egress: opt(arr(str)),
  mcp: opt(MCPServers),
});

export const ThreadInfo = obj({
  id: str,
  scope: oneOf("thread", "assistant"),
  assistant: opt(str),
  image: str,
  runtime: opt(str),
  status: oneOf("running", "exited", "suspended"),
  sandbox_id: str,
  created: str,
  expires: str,
  idle_expires: str,
  clients: num,
  egress: opt(arr(str)),
  image_id: opt(str),
  agent_version: opt(str),
  agent_hash: opt(str),
  suspended: opt(str),
  owner: opt(str),
  posture: opt(Posture),
  relay: opt(str),
});

export const ThreadList = obj({ threads: arr(ThreadInfo) });

/** GET /v1/images: the images a thread may ask for, the default first. */
export const ImageList = obj({ default: str, images: arr(str) });

/** File transfers (docs/files.md). */
export const FileResult = obj({ path: str, size: opt(num), code: opt(str), message: opt(str) });

export const TransferResult = obj({ files: arr(FileResult), count: num, bytes: num, failed: num });

export type Posture = TypeOf<typeof Posture>;
export type Hello = TypeOf<typeof Hello>;
export type Text = TypeOf<typeof Text>;
export type ToolCall = TypeOf<typeof ToolCall>;
export type ToolOutput = TypeOf<typeof ToolOutput>;
export type ToolResult = TypeOf<typeof ToolResult>;
export type Usage = TypeOf<typeof Usage>;
export type TurnDone = TypeOf<typeof TurnDone>;
export type ErrorPayload = TypeOf<typeof ErrorPayload>;
export type RunTool = TypeOf<typeof RunTool>;
export type ApprovalRequest = TypeOf<typeof ApprovalRequest>;
export type ApprovalDecision = TypeOf<typeof ApprovalDecision>;
export type ApprovalAnswer = TypeOf<typeof ApprovalAnswer>;
export type ToolCheck = TypeOf<typeof ToolCheck>;
export type ToolVerdict = TypeOf<typeof ToolVerdict>;
export type UsageReport = TypeOf<typeof UsageReport>;
export type EgressDecision = TypeOf<typeof EgressDecision>;
export type EgressRules = TypeOf<typeof EgressRules>;
export type SandboxExited = TypeOf<typeof SandboxExited>;
export type SandboxReplaced = TypeOf<typeof SandboxReplaced>;
export type Resume = TypeOf<typeof Resume>;
export type Resumed = TypeOf<typeof Resumed>;
export type EventsLost = TypeOf<typeof EventsLost>;
export type Claim = TypeOf<typeof Claim>;
export type TerminalOpen = TypeOf<typeof TerminalOpen>;
export type TerminalRef = TypeOf<typeof TerminalRef>;
export type TerminalResize = TypeOf<typeof TerminalResize>;
export type TerminalSignal = TypeOf<typeof TerminalSignal>;
export type TerminalInfo = TypeOf<typeof TerminalInfo>;
export type TerminalAttached = TypeOf<typeof TerminalAttached>;
export type TerminalDetached = TypeOf<typeof TerminalDetached>;
export type TerminalExit = TypeOf<typeof TerminalExit>;
export type TerminalSessions = TypeOf<typeof TerminalSessions>;
export type StreamLimits = TypeOf<typeof StreamLimits>;
export type PortOpen = TypeOf<typeof PortOpen>;
export type StreamRef = TypeOf<typeof StreamRef>;
export type StreamClose = TypeOf<typeof StreamClose>;
export type Port = TypeOf<typeof Port>;
export type Ports = TypeOf<typeof Ports>;
export type MCPServer = TypeOf<typeof MCPServer>;
export type MCPServers = TypeOf<typeof MCPServers>;
export type HostTool = TypeOf<typeof HostTool>;
export type HostTools = TypeOf<typeof HostTools>;
export type HostCall = TypeOf<typeof HostCall>;
export type HostProgress = TypeOf<typeof HostProgress>;
export type HostResult = TypeOf<typeof HostResult>;
export type CreateThread = TypeOf<typeof CreateThread>;
export type ThreadInfo = TypeOf<typeof ThreadInfo>;
export type ThreadList = TypeOf<typeof ThreadList>;
export type ImageList = TypeOf<typeof ImageList>;
export type FileResult = TypeOf<typeof FileResult>;
export type TransferResult = TypeOf<typeof TransferResult>;
