// Errors: one Error subclass per protocol error code (docs/protocol.md,
// Errors; docs/files.md, Errors). A refusal over HTTP and an error message
// over the WebSocket become the same class; `code` is the protocol's code,
// `status` the HTTP status when it came over HTTP.

/** BoxwireError is the base of every error the bridge or agent reported. */
export class BoxwireError extends Error {
  override name = "BoxwireError";
  /** The protocol's error code, e.g. "not_found". */
  readonly code: string;
  /** The HTTP status when the error answered an HTTP request. */
  readonly status: number | undefined;

  constructor(code: string, message: string, status?: number) {
    super(`${code}: ${message}`);
    this.code = code;
    this.status = status;
  }
}

/** The frame is not an envelope, its data does not fit, or a body is not a tar stream. */
export class BadMessageError extends BoxwireError {
  override name = "BadMessageError";
}
/** The type is not defined by this protocol version. */
export class UnknownTypeError extends BoxwireError {
  override name = "UnknownTypeError";
}
/** A frame or a file transfer over its limit. */
export class TooLargeError extends BoxwireError {
  override name = "TooLargeError";
}
/** hello carried another protocol version. */
export class VersionMismatchError extends BoxwireError {
  override name = "VersionMismatchError";
}
/** A user_message while a turn runs. */
export class BusyError extends BoxwireError {
  override name = "BusyError";
}
/** No such thread (or it was deleted), approval or terminal session. */
export class NotFoundError extends BoxwireError {
  override name = "NotFoundError";
}
/** hello's after_seq is beyond the thread's last event; events follow from the log's end. */
export class SeqAheadError extends BoxwireError {
  override name = "SeqAheadError";
}
/** A bridge-only type, or an image, runtime, scope or egress the bridge does not allow. */
export class NotAllowedError extends BoxwireError {
  override name = "NotAllowedError";
}
/** The token is missing or wrong (HTTP 401). */
export class UnauthorizedError extends BoxwireError {
  override name = "UnauthorizedError";
}
/** The bridge already runs its maximum number of sandboxes. */
export class SandboxLimitError extends BoxwireError {
  override name = "SandboxLimitError";
}
/** The thread's sandbox could not be started, reached or replaced. */
export class SandboxUnavailableError extends BoxwireError {
  override name = "SandboxUnavailableError";
}
/** The bridge cannot reach the container engine. */
export class EngineUnavailableError extends BoxwireError {
  override name = "EngineUnavailableError";
}
/** The model endpoint failed. */
export class LLMError extends BoxwireError {
  override name = "LLMError";
}
/** The thread's model budget refused a call. */
export class BudgetExceededError extends BoxwireError {
  override name = "BudgetExceededError";
}
/** Anything else, e.g. the bridge is shutting down. */
export class InternalError extends BoxwireError {
  override name = "InternalError";
}
/** File transfers: the path does not exist. */
export class FileNotFoundError extends BoxwireError {
  override name = "FileNotFoundError";
}
/** File transfers: the sandbox user may not read or write it. */
export class PermissionDeniedError extends BoxwireError {
  override name = "PermissionDeniedError";
}
/** File transfers: a file was expected but the path is a folder. */
export class IsDirectoryError extends BoxwireError {
  override name = "IsDirectoryError";
}
/** File transfers: outside the workspace, through a link out of it, or an unsupported entry. */
export class InvalidPathError extends BoxwireError {
  override name = "InvalidPathError";
}

type ErrorClass = new (code: string, message: string, status?: number) => BoxwireError;

/** The class of each protocol error code. */
export const ERROR_CLASSES: Readonly<Record<string, ErrorClass>> = {
  bad_message: BadMessageError,
  unknown_type: UnknownTypeError,
  too_large: TooLargeError,
  version_mismatch: VersionMismatchError,
  busy: BusyError,
  not_found: NotFoundError,
  seq_ahead: SeqAheadError,
  not_allowed: NotAllowedError,
  unauthorized: UnauthorizedError,
  sandbox_limit: SandboxLimitError,
  sandbox_unavailable: SandboxUnavailableError,
  engine_unavailable: EngineUnavailableError,
  llm_error: LLMError,
  budget_exceeded: BudgetExceededError,
  internal: InternalError,
  file_not_found: FileNotFoundError,
  permission_denied: PermissionDeniedError,
  is_directory: IsDirectoryError,
  invalid_path: InvalidPathError,
};

/** errorFromCode builds the error of code (a BoxwireError for codes this SDK does not know). */
export function errorFromCode(code: string, message: string, status?: number): BoxwireError {
  const cls = Object.hasOwn(ERROR_CLASSES, code) ? ERROR_CLASSES[code] : undefined;
  return cls ? new cls(code, message, status) : new BoxwireError(code, message, status);
}

/** ConnectionClosedError ends a connection the caller did not close. */
export class ConnectionClosedError extends Error {
  override name = "ConnectionClosedError";
  /** The WebSocket close code (1000 normal, 1001 going away, 1006 no close frame, 1013 too slow). */
  readonly closeCode: number;
  readonly reason: string;

  constructor(closeCode: number, reason: string, message?: string) {
    super(message ?? `connection closed (${closeCode}${reason ? " " + reason : ""})`);
    this.closeCode = closeCode;
    this.reason = reason;
  }
}

/** SlowConsumerError ends a connection whose events were not read fast enough; resume from lastSeq. */
export class SlowConsumerError extends ConnectionClosedError {
  override name = "SlowConsumerError";
  constructor(buffered: number) {
    super(1000, "", `events not read fast enough (${buffered} waiting): reconnect with afterSeq`);
  }
}
