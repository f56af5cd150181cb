// Package files serves file transfers in and out of the agent's workspace
// over HTTP (wire.FilesPath, docs/files.md): PUT uploads a tar stream or one
// file's raw bytes and answers with per-file results; GET downloads a file
// or a directory as a tar stream (or one file raw) and reports per-file
// failures in an HTTP trailer.
//
// Every path is confined to the workspace with an os.Root: relative paths
// and absolute paths under the workspace are accepted, and a symbolic link
// is never followed out of the workspace. Uploaded files are written to a
// temporary name and renamed into place, so an upload replaces a link
// rather than writing through it.
package files
