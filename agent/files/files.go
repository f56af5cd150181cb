package files

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/boxwire/boxwire/bridge/wire"
)

// DefaultMaxFileBytes is Config.MaxFileBytes's default: 4 GiB.
const DefaultMaxFileBytes = 4 << 30

// Config configures a Handler. Workspace is required; zero values of the
// other fields mean their defaults.
type Config struct {
	// Workspace is the directory transfers are confined to.
	Workspace string
	// MaxFileBytes caps one uploaded file; a larger one is skipped with
	// code too_large (a raw upload is answered 413).
	MaxFileBytes int64
	// SandboxRoots are folders outside the workspace that a request with
	// the query parameter sandbox_paths=1 may name by absolute path
	// (places in the sandbox itself, like its /tmp); nil means
	// DefaultSandboxRoots, an empty non-nil slice none.
	SandboxRoots []string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// DefaultSandboxRoots is Config.SandboxRoots's default: the sandbox's /tmp.
var DefaultSandboxRoots = []string{"/tmp"}

// Handler serves wire.FilesPath. It does not authenticate: mount it behind
// the same token check as the WebSocket. It is safe for concurrent use and
// starts no goroutines; each request blocks its handler until the transfer
// ends.
type Handler struct {
	cfg Config
	log *slog.Logger
}

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.SandboxRoots == nil {
		cfg.SandboxRoots = DefaultSandboxRoots
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg, log: log.With("component", "files")}
}

// drainLimit bounds how much of a request body left unread (an upload
// refused early) is read and discarded before the answer goes out, so that
// a client still sending it gets the answer rather than a broken pipe.
const drainLimit = 64 << 20

// ServeHTTP uploads on PUT (and POST) and downloads on GET.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() { _, _ = io.Copy(io.Discard, io.LimitReader(r.Body, drainLimit)) }()
	q := r.URL.Query()
	dir, rel, err := h.locate(q.Get("path"), q.Get("sandbox_paths") == "1")
	if err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalidPath, err.Error())
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, fmt.Sprintf("open %s: %v", dir, err))
		return
	}
	defer root.Close()
	raw := r.URL.Query().Get("format") == "raw"
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.download(w, r, root, rel, raw)
	case http.MethodPut, http.MethodPost:
		if ct := r.Header.Get("Content-Type"); strings.HasPrefix(ct, wire.ContentTypeTar) {
			h.uploadTar(w, r, root, rel)
		} else {
			h.uploadRaw(w, r, root, rel)
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, POST")
		writeError(w, http.StatusMethodNotAllowed, wire.CodeBadMessage, r.Method+" is not supported")
	}
}

// locate returns the folder a request's path lies in and the path relative
// to it: the workspace, or with sandbox set (an absolute path outside the
// workspace) the sandbox root holding it. The folder is opened as an
// os.Root, so nothing below it climbs out.
func (h *Handler) locate(p string, sandbox bool) (dir, rel string, err error) {
	if sandbox && strings.HasPrefix(p, "/") && !strings.ContainsRune(p, 0) {
		c := path.Clean(p)
		if !within(filepath.Clean(h.cfg.Workspace), c) {
			for _, r := range h.cfg.SandboxRoots {
				r = filepath.Clean(r)
				if within(r, c) {
					rel, _ := filepath.Rel(r, c)
					return r, rel, nil
				}
			}
		}
	}
	rel, err = h.clean(p)
	return h.cfg.Workspace, rel, err
}

// within reports whether the clean absolute path p is root or below it.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// clean turns a client's path into a clean path relative to the workspace
// ("." for the workspace itself). Absolute paths must lie under the
// workspace; no path may climb out of it.
func (h *Handler) clean(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		ws := filepath.Clean(h.cfg.Workspace)
		c := path.Clean(p)
		rel, err := filepath.Rel(ws, c)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fmt.Errorf("path %q is outside the workspace %s", p, ws)
		}
		return rel, nil
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q is outside the workspace", p)
	}
	return c, nil
}

// codeFor classifies a filesystem error.
func codeFor(err error) wire.Code {
	var ce codedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, fs.ErrNotExist):
		return wire.CodeFileNotFound
	case errors.Is(err, fs.ErrPermission):
		return wire.CodePermissionDenied
	case errors.Is(err, syscall.EISDIR):
		return wire.CodeIsDirectory
	case errors.Is(err, syscall.EFBIG), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return wire.CodeTooLarge
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP), escapes(err):
		return wire.CodeInvalidPath
	}
	return wire.CodeInternal
}

// codedError is a failure this package classifies itself.
type codedError struct {
	code wire.Code
	msg  string
}

func (e codedError) Error() string { return e.msg }

func errorf(code wire.Code, format string, args ...any) error {
	return codedError{code: code, msg: fmt.Sprintf(format, args...)}
}

// escapes reports whether err is os.Root refusing a path that leaves it
// (through ".." or a symbolic link). os exports no sentinel for it.
func escapes(err error) bool {
	return strings.Contains(err.Error(), "path escapes from parent")
}

// statusFor is the HTTP status for a request-level error code.
func statusFor(code wire.Code) int {
	switch code {
	case wire.CodeFileNotFound:
		return http.StatusNotFound
	case wire.CodePermissionDenied:
		return http.StatusForbidden
	case wire.CodeIsDirectory:
		return http.StatusConflict
	case wire.CodeInvalidPath, wire.CodeBadMessage:
		return http.StatusBadRequest
	case wire.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

// errorBody is the JSON body of an HTTP error, as the bridge writes it.
type errorBody struct {
	Error wire.Error `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code wire.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: wire.Error{Code: code, Message: msg}})
}

// writeFSError answers a request whose path failed with err.
func writeFSError(w http.ResponseWriter, rel string, err error) {
	code := codeFor(err)
	writeError(w, statusFor(code), code, fmt.Sprintf("%s: %s", rel, describe(err)))
}

// describe is err without the absolute path os puts in PathErrors.
func describe(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// add records one entry's outcome in res.
func add(res *wire.TransferResult, rel string, size int64, err error) {
	if err == nil {
		res.Files = append(res.Files, wire.FileResult{Path: rel, Size: size})
		res.Count++
		res.Bytes += size
		return
	}
	res.Files = append(res.Files, wire.FileResult{Path: rel, Code: codeFor(err), Message: describe(err)})
	res.Failed++
}
