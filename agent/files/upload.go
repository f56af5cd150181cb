package files

import (
	"archive/tar"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
)

// uploadTar extracts the tar stream in r's body under dest and answers with
// a wire.TransferResult listing every entry. A stream that is not a valid
// tar ends the upload with 400 bad_message (entries before it are kept).
func (h *Handler) uploadTar(w http.ResponseWriter, r *http.Request, root *os.Root, dest string) {
	if err := mkdirAll(root, dest); err != nil {
		writeFSError(w, dest, err)
		return
	}
	res := wire.TransferResult{Files: []wire.FileResult{}}
	tr := tar.NewReader(r.Body)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge, err.Error())
				return
			}
			writeError(w, http.StatusBadRequest, wire.CodeBadMessage, fmt.Sprintf("read tar: %v", err))
			return
		}
		rel, size, err := h.extract(root, dest, hdr, tr)
		add(&res, rel, size, err)
		if err != nil {
			h.log.Debug("upload entry failed", "path", rel, "err", err)
		}
	}
	h.log.Info("upload", "dest", dest, "count", res.Count, "bytes", res.Bytes, "failed", res.Failed)
	writeJSON(w, res)
}

// extract writes one tar entry below dest; it returns the entry's path
// relative to the workspace and the bytes written.
func (h *Handler) extract(root *os.Root, dest string, hdr *tar.Header, body io.Reader) (string, int64, error) {
	name := path.Clean(strings.TrimPrefix(hdr.Name, "./"))
	if path.IsAbs(hdr.Name) || name == ".." || strings.HasPrefix(name, "../") || strings.ContainsRune(name, 0) {
		return hdr.Name, 0, errorf(wire.CodeInvalidPath, "entry name %q leaves the destination", hdr.Name)
	}
	rel := path.Join(dest, name)
	mode := fs.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := mkdirAll(root, rel); err != nil {
			return rel, 0, err
		}
		return rel, 0, root.Chmod(rel, mode|0o700)
	case tar.TypeReg:
		if hdr.Size > h.cfg.MaxFileBytes {
			return rel, 0, errorf(wire.CodeTooLarge, "%d bytes is over the limit of %d", hdr.Size, h.cfg.MaxFileBytes)
		}
		if err := mkdirAll(root, path.Dir(rel)); err != nil {
			return rel, 0, err
		}
		n, err := writeFile(root, rel, body, mode, h.cfg.MaxFileBytes)
		if err == nil && !hdr.ModTime.IsZero() {
			_ = root.Chtimes(rel, time.Now(), hdr.ModTime)
		}
		return rel, n, err
	case tar.TypeSymlink:
		return rel, 0, symlink(root, rel, hdr.Linkname)
	case tar.TypeLink:
		return rel, 0, errorf(wire.CodeInvalidPath, "hard links are not supported")
	default:
		return rel, 0, errorf(wire.CodeInvalidPath, "unsupported entry type %q", hdr.Typeflag)
	}
}

// uploadRaw writes r's body to the file dest and answers with a
// wire.TransferResult of one entry, or an HTTP error when it failed.
func (h *Handler) uploadRaw(w http.ResponseWriter, r *http.Request, root *os.Root, dest string) {
	if dest == "." {
		writeError(w, http.StatusConflict, wire.CodeIsDirectory, "a raw upload needs a file path, not the workspace")
		return
	}
	if r.ContentLength > h.cfg.MaxFileBytes {
		writeError(w, http.StatusRequestEntityTooLarge, wire.CodeTooLarge,
			fmt.Sprintf("%d bytes is over the limit of %d", r.ContentLength, h.cfg.MaxFileBytes))
		return
	}
	err := mkdirAll(root, path.Dir(dest))
	var n int64
	if err == nil {
		n, err = writeFile(root, dest, r.Body, 0o644, h.cfg.MaxFileBytes)
	}
	if err != nil {
		writeFSError(w, dest, err)
		return
	}
	res := wire.TransferResult{Count: 1, Bytes: n, Files: []wire.FileResult{{Path: dest, Size: n}}}
	h.log.Info("upload", "dest", dest, "bytes", n)
	writeJSON(w, res)
}

// writeFile writes at most limit bytes from body to a temporary file next
// to rel and renames it over rel. A directory at rel is CodeIsDirectory.
func writeFile(root *os.Root, rel string, body io.Reader, mode fs.FileMode, limit int64) (int64, error) {
	if fi, err := root.Lstat(rel); err == nil && fi.IsDir() {
		return 0, errorf(wire.CodeIsDirectory, "%s is a directory", rel)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+".upload-"+hex.EncodeToString(b[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(body, limit+1))
	if err == nil && n > limit {
		err = errorf(wire.CodeTooLarge, "over the limit of %d bytes", limit)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(tmp, mode)
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = errorf(wire.CodeTooLarge, "%v", err)
		}
		return 0, err
	}
	return n, nil
}

// symlink creates rel as a link to target, which must stay in the
// workspace when read from rel's folder.
func symlink(root *os.Root, rel, target string) error {
	if target == "" || path.IsAbs(target) {
		return errorf(wire.CodeInvalidPath, "link target %q must be a relative path inside the workspace", target)
	}
	to := path.Join(path.Dir(rel), target)
	if to == ".." || strings.HasPrefix(to, "../") {
		return errorf(wire.CodeInvalidPath, "link target %q leaves the workspace", target)
	}
	if err := mkdirAll(root, path.Dir(rel)); err != nil {
		return err
	}
	if fi, err := root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return errorf(wire.CodeIsDirectory, "%s is a directory", rel)
		}
		if err := root.Remove(rel); err != nil {
			return err
		}
	}
	return root.Symlink(target, rel)
}

// mkdirAll creates the folder rel and its parents; "." exists already.
func mkdirAll(root *os.Root, rel string) error {
	if rel == "." {
		return nil
	}
	if err := root.MkdirAll(rel, 0o755); err != nil {
		return err
	}
	fi, err := root.Stat(rel)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return errorf(wire.CodeInvalidPath, "%s is not a directory", rel)
	}
	return nil
}
