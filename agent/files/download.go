package files

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"

	"github.com/boxwire/boxwire/bridge/wire"
)

// download answers GET: the file rel raw (raw set), or rel (a file or a
// folder) as a tar stream whose entries are named from rel's base name
// (the workspace root's entries have no prefix). Links inside are sent as
// links, never followed; rel itself may be a link that stays inside the
// workspace. Per-entry failures skip the entry and are reported in the
// wire.ResultsTrailer trailer.
func (h *Handler) download(w http.ResponseWriter, r *http.Request, root *os.Root, rel string, raw bool) {
	fi, err := root.Stat(rel)
	if err != nil {
		writeFSError(w, rel, err)
		return
	}
	if raw {
		h.downloadRaw(w, r, root, rel, fi)
		return
	}
	w.Header().Set("Content-Type", wire.ContentTypeTar)
	w.Header().Set("Trailer", wire.ResultsTrailer)
	if r.Method == http.MethodHead {
		return
	}
	prefix := path.Base(rel)
	if rel == "." {
		prefix = ""
	}
	d := &tarWriter{root: root, tw: tar.NewWriter(w), res: wire.TransferResult{Files: []wire.FileResult{}}}
	err = d.add(rel, prefix, fi)
	if err == nil {
		err = d.tw.Close()
	}
	if err != nil {
		d.res.Files = append(d.res.Files, wire.FileResult{Path: rel, Code: wire.CodeInternal, Message: err.Error()})
		d.res.Failed++
		h.log.Warn("download aborted", "path", rel, "err", err)
	}
	d.res.Files = slices.DeleteFunc(d.res.Files, func(f wire.FileResult) bool { return f.Code == "" })
	data, _ := json.Marshal(d.res)
	w.Header().Set(wire.ResultsTrailer, string(data))
	h.log.Info("download", "path", rel, "count", d.res.Count, "bytes", d.res.Bytes, "failed", d.res.Failed)
}

func (h *Handler) downloadRaw(w http.ResponseWriter, r *http.Request, root *os.Root, rel string, fi fs.FileInfo) {
	if fi.IsDir() {
		writeError(w, http.StatusConflict, wire.CodeIsDirectory, rel+" is a directory; download it as a tar")
		return
	}
	if !fi.Mode().IsRegular() {
		writeError(w, http.StatusBadRequest, wire.CodeInvalidPath, rel+" is not a regular file")
		return
	}
	f, err := root.Open(rel)
	if err != nil {
		writeFSError(w, rel, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", wire.ContentTypeRaw)
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.CopyN(w, f, fi.Size()); err != nil {
		h.log.Warn("raw download aborted", "path", rel, "err", err)
	}
}

// tarWriter writes workspace entries to a tar stream.
type tarWriter struct {
	root *os.Root
	tw   *tar.Writer
	res  wire.TransferResult
}

// add writes the entry rel (described by fi) as name, and a folder's
// contents below it. Failures of one entry are recorded and skipped; the
// returned error is a failed write to the stream, which ends it.
func (d *tarWriter) add(rel, name string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return d.addDir(rel, name, fi)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := d.root.Readlink(rel)
		if err != nil {
			add(&d.res, rel, 0, err)
			return nil
		}
		hdr := &tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: fi.ModTime(), Format: tar.FormatPAX}
		if err := d.tw.WriteHeader(hdr); err != nil {
			return err
		}
		add(&d.res, rel, 0, nil)
		return nil
	case fi.Mode().IsRegular():
		return d.addFile(rel, name, fi)
	default:
		add(&d.res, rel, 0, errorf(wire.CodeInvalidPath, "%s is not a file, folder or link", rel))
		return nil
	}
}

func (d *tarWriter) addDir(rel, name string, fi fs.FileInfo) error {
	f, err := d.root.Open(rel)
	if err != nil {
		add(&d.res, rel, 0, err)
		return nil
	}
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		add(&d.res, rel, 0, err)
		return nil
	}
	if name != "" {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
		if err := d.tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	for _, e := range entries {
		crel, cname := path.Join(rel, e.Name()), path.Join(name, e.Name())
		cfi, err := e.Info()
		if err != nil {
			add(&d.res, crel, 0, err)
			continue
		}
		if err := d.add(crel, cname, cfi); err != nil {
			return err
		}
	}
	return nil
}

func (d *tarWriter) addFile(rel, name string, fi fs.FileInfo) error {
	f, err := d.root.Open(rel)
	if err != nil {
		add(&d.res, rel, 0, err)
		return nil
	}
	defer f.Close()
	if name == "" { // the workspace root is never a file; be safe
		name = path.Base(rel)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
	if err := d.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyN(d.tw, f, fi.Size()); err != nil {
		return fmt.Errorf("copy %s: %w", rel, err)
	}
	add(&d.res, rel, fi.Size(), nil)
	return nil
}
