package cli

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// progressEvery is how often a progress line is redrawn.
const progressEvery = 200 * time.Millisecond

// upload tars the local file or folder src (named by its base name) and
// sends it into the workspace folder ft.Path. progress, if not nil, shows
// the bytes sent on a terminal. The tar writer goroutine is waited for.
func upload(ctx context.Context, cfg chat.Config, src string, ft chat.FileTransfer, progress io.Writer) (wire.TransferResult, error) {
	src = filepath.Clean(src)
	total, err := localSize(src)
	if err != nil {
		return wire.TransferResult{}, err
	}
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { pw.CloseWithError(writeTar(pw, src)) })
	body := io.Reader(pr)
	var bar *progressBar
	if progress != nil {
		bar = newProgress(progress, "↑ "+filepath.Base(src), total)
		body = io.TeeReader(pr, bar)
	}
	res, err := chat.Upload(ctx, cfg, ft, wire.ContentTypeTar, body, -1)
	pr.CloseWithError(errors.New("upload ended"))
	wg.Wait()
	bar.finish()
	return res, err
}

// localSize adds up the sizes of the regular files at or below p.
func localSize(p string) (int64, error) {
	var n int64
	err := filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// writeTar writes src and everything below it to w as a tar stream whose
// names start with src's base name. Links are stored, not followed.
func writeTar(w io.Writer, src string) error {
	tw := tar.NewWriter(w)
	base := filepath.Dir(src)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = "", "", 0, 0
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, fi.Size())
		return err
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", src, err)
	}
	return tw.Close()
}

// download fetches the workspace file or folder ft.Path as a tar stream
// and extracts it into the local folder dst (created if missing). Entry
// names that leave dst are refused; links are created, never followed.
func download(ctx context.Context, cfg chat.Config, ft chat.FileTransfer, dst string, progress io.Writer) (wire.TransferResult, error) {
	d, err := chat.OpenDownload(ctx, cfg, ft, false)
	if err != nil {
		return wire.TransferResult{}, err
	}
	defer d.Close()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return wire.TransferResult{}, fmt.Errorf("download: %w", err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return wire.TransferResult{}, fmt.Errorf("download: %w", err)
	}
	defer root.Close()
	body := io.Reader(d.Body)
	var bar *progressBar
	if progress != nil {
		bar = newProgress(progress, "↓ "+path.Base(ft.Path), -1)
		body = io.TeeReader(d.Body, bar)
	}
	err = extractTar(root, body)
	bar.finish()
	if err != nil {
		return wire.TransferResult{}, fmt.Errorf("download %s: %w", ft.Path, err)
	}
	_, _ = io.Copy(io.Discard, d.Body) // reach EOF so the trailer is read
	res, err := d.Result()
	if err == nil && res.Failed > 0 {
		err = fmt.Errorf("download %s: %d failed: %w", ft.Path, res.Failed, chat.ErrTransferIncomplete)
	}
	return res, err
}

// extractTar writes a tar stream's entries below root.
func extractTar(root *os.Root, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if path.IsAbs(hdr.Name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("entry %q leaves the destination", hdr.Name)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return err
			}
			_ = root.Remove(name) // replace, never write through a link
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			_ = root.Chtimes(name, time.Now(), hdr.ModTime)
		case tar.TypeSymlink:
			_ = root.Remove(name)
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		}
	}
}

// progressBar draws "label  12.3 MiB / 50.0 MiB" on one terminal line.
type progressBar struct {
	w     io.Writer
	label string
	total int64
	n     int64
	last  time.Time
}

func newProgress(w io.Writer, label string, total int64) *progressBar {
	return &progressBar{w: w, label: label, total: total}
}

// Write counts bytes passing through a TeeReader.
func (p *progressBar) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	if now := time.Now(); now.Sub(p.last) >= progressEvery {
		p.last = now
		p.draw()
	}
	return len(b), nil
}

func (p *progressBar) draw() {
	if p.total > 0 {
		pct := min(100, p.n*100/p.total)
		bar := strings.Repeat("█", int(pct/5)) + strings.Repeat("░", 20-int(pct/5))
		fmt.Fprintf(p.w, "\r\x1b[K%s %s %3d%% %s / %s", p.label, bar, pct, mib(p.n), mib(p.total))
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s %s", p.label, mib(p.n))
}

// finish draws the final state and ends the line; nil is a no-op.
func (p *progressBar) finish() {
	if p == nil {
		return
	}
	p.draw()
	fmt.Fprintln(p.w)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// parseRemote splits "THREAD:PATH"; ok is false for a local path. A path
// starting with "/" or "." is local even if it holds a colon.
func parseRemote(arg string) (ft chat.FileTransfer, ok bool) {
	if strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return chat.FileTransfer{}, false
	}
	thread, p, found := strings.Cut(arg, ":")
	if !found || strings.Contains(thread, "/") {
		return chat.FileTransfer{}, false
	}
	if p == "" {
		p = "."
	}
	return chat.FileTransfer{Thread: thread, Path: p}, true
}
