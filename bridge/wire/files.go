package wire

// Moving files in and out of a sandbox's workspace (docs/files.md). Files
// travel over HTTP, not over the WebSocket: the agent serves FilesPath next
// to Path, and the bridge serves ThreadFilesPath, forwarding to the thread's
// agent. Upload answers with a TransferResult; a download is a tar stream
// (or the raw bytes of one file) whose per-file failures arrive in the
// ResultsTrailer HTTP trailer, also as a TransferResult.

// FilesPath is the agent's file transfer endpoint: PUT uploads, GET
// downloads; the query parameter "path" names the workspace path.
const FilesPath = "/v1/files"

// ThreadFilesPath is the bridge's file transfer endpoint for one thread, as
// an http.ServeMux pattern; it forwards to the thread agent's FilesPath.
const ThreadFilesPath = "/v1/threads/{id}/files"

// Content types of file transfers.
const (
	// ContentTypeTar is a tar stream (upload of many files, download of a
	// directory or a file).
	ContentTypeTar = "application/x-tar"
	// ContentTypeRaw is the bytes of one file.
	ContentTypeRaw = "application/octet-stream"
)

// ResultsTrailer is the HTTP trailer of a download that carries its
// TransferResult as compact JSON, sent once the body is complete.
const ResultsTrailer = "Boxwire-Results"

// File transfer error codes, in FileResult.Code and in HTTP error bodies.
// CodeTooLarge (wire.go) is used too: a file or a request over a size limit.
const (
	// CodeFileNotFound: the path does not exist.
	CodeFileNotFound Code = "file_not_found"
	// CodePermissionDenied: the sandbox user may not read or write it.
	CodePermissionDenied Code = "permission_denied"
	// CodeIsDirectory: a file was expected (a raw download or upload, a
	// file entry where a directory is) but the path is a directory.
	CodeIsDirectory Code = "is_directory"
	// CodeInvalidPath: the path is empty, malformed, outside the workspace,
	// reaches outside through a link, or names an unsupported entry type.
	CodeInvalidPath Code = "invalid_path"
)

// FileResult is the outcome for one file of a transfer.
type FileResult struct {
	// Path is the file's path relative to the workspace.
	Path string `json:"path"`
	// Size is the number of bytes written or read (files only).
	Size int64 `json:"size,omitempty"`
	// Code and Message are set when this file failed; the transfer of the
	// other files goes on.
	Code    Code   `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// TransferResult summarises a transfer. For an upload Files lists every
// entry; for a download it lists only the entries that failed.
type TransferResult struct {
	// Files is the per-file outcome (see above).
	Files []FileResult `json:"files"`
	// Count is the number of entries transferred successfully, Bytes their
	// total file size, Failed the number that failed.
	Count  int   `json:"count"`
	Bytes  int64 `json:"bytes"`
	Failed int   `json:"failed"`
}
