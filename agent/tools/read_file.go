package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/boxwire/boxwire/agent/tool"
)

const (
	defaultReadLimit = 200
	// maxLineBytes is the longest line part shown; longer lines come in
	// parts. maxLineKeep caps one line as read; the rest is counted only.
	maxLineBytes = 2000
	maxLineKeep  = 256 << 10
	// binarySniff is how much of a file is checked for NUL bytes.
	binarySniff = 8 << 10
)

type readFile struct {
	ws    workspace
	limit int // output bytes
}

func (*readFile) Name() string { return "read_file" }

func (*readFile) Description() string {
	return "Read a text file from the workspace. Lines come numbered as \"N<TAB>text\", " +
		"a page at a time (200 lines unless limit says otherwise); very long lines come in parts N.1, N.2, ... " +
		"The result says how many lines the file has and which offset continues it. Binary files are refused. " +
		"It can also read the full-output files that execute names (outside the workspace)."
}

func (*readFile) Parameters() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "File path, relative to the workspace or absolute inside it."},
    "offset": {"type": "integer", "minimum": 0, "description": "Number of lines to skip (0-based line to start at)."},
    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return (default 200)."}
  },
  "required": ["path"]
}`)
}

type readFileArgs struct {
	Path   *string `json:"path"`
	Offset *int    `json:"offset"`
	Limit  *int    `json:"limit"`
}

// Run reads one page of the file. It does not block beyond the file reads.
func (r *readFile) Run(_ context.Context, call Call) Result {
	var args readFileArgs
	if err := tool.DecodeArgs(call.Args, &args); err != nil {
		return tool.Failed("%v", err)
	}
	ws := r.ws.forCall(call.Args)
	if args.Path == nil {
		return tool.Missing("path")
	}
	offset, limit := 0, defaultReadLimit
	if args.Offset != nil {
		if offset = *args.Offset; offset < 0 {
			return tool.Failed("offset must be 0 or more, got %d", offset)
		}
	}
	if args.Limit != nil {
		if limit = *args.Limit; limit <= 0 {
			return tool.Failed("limit must be 1 or more, got %d", limit)
		}
	}
	real, err := ws.resolveRead(*args.Path)
	if err != nil {
		return tool.Failed("%v", err)
	}
	name := ws.display(real)
	f, err := openRegular(real, name)
	if err != nil {
		return tool.Failed("%v", err)
	}
	defer f.Close()

	br := bufio.NewReaderSize(f, 64<<10)
	sniff, err := br.Peek(binarySniff)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return tool.Failed("read %s: %v", name, err)
	}
	if len(sniff) == 0 {
		return Result{Output: fmt.Sprintf("(%s is empty)", name)}
	}
	if bytes.IndexByte(sniff, 0) >= 0 {
		return tool.Failed("refused: %s looks like a binary file (NUL bytes in its first 8 KiB); inspect it with execute (file, xxd, head -c)", name)
	}
	return r.page(br, name, offset, limit)
}

// openRegular opens path for reading and refuses what is not a file.
func openRegular(path, name string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", name)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %v", name, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %v", name, err)
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory, not a file", name)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	return f, nil
}

// page formats lines offset+1 .. offset+limit, stopping early when the
// output would pass the byte limit, and counts the file's lines. A line
// longer than maxLineBytes is shown in parts N.1, N.2, ... that count as
// one line.
func (r *readFile) page(br *bufio.Reader, name string, offset, limit int) Result {
	var b strings.Builder
	total, last := 0, 0 // lines seen; last line shown
	full := false       // the byte limit stopped the page
	for {
		line, dropped, more, err := readLine(br)
		if err != nil {
			return tool.Failed("read %s: %v", name, err)
		}
		if !more {
			break
		}
		total++
		if total <= offset || total > offset+limit || full {
			continue
		}
		entry := formatLine(total, line, dropped)
		if b.Len()+len(entry) > r.limit && last > offset {
			full = true
			continue
		}
		if b.Len()+len(entry) > r.limit { // a first line too long for a page
			entry = entry[:len(tool.TrimPartialRune([]byte(entry[:r.limit])))]
			entry += fmt.Sprintf("\n[line %d goes on past this page's %d bytes; see it with execute, e.g. cut -c or fold]\n", total, r.limit)
		}
		b.WriteString(entry)
		last = total
	}
	if total == 0 {
		return Result{Output: fmt.Sprintf("(%s is empty)", name)}
	}
	if offset >= total {
		return tool.Failed("offset %d is past the end of %s, which has %d lines", offset, name, total)
	}
	if last < total {
		fmt.Fprintf(&b, "\n[%s: lines %d-%d of %d; to read on, call read_file with offset=%d]", name, offset+1, last, total, last)
	} else {
		fmt.Fprintf(&b, "\n[%s: lines %d-%d of %d, end of file]", name, offset+1, last, total)
	}
	return Result{Output: b.String()}
}

// formatLine numbers a line, splitting a long one into parts N.1, N.2, ...
// on character boundaries.
func formatLine(n int, line string, dropped int) string {
	if len(line) <= maxLineBytes && dropped == 0 {
		return fmt.Sprintf("%d\t%s\n", n, line)
	}
	var b strings.Builder
	for part := 1; len(line) > 0; part++ {
		k := min(maxLineBytes, len(line))
		if k < len(line) {
			k = len(tool.TrimPartialRune([]byte(line[:k])))
			if k == 0 {
				k = min(maxLineBytes, len(line))
			}
		}
		fmt.Fprintf(&b, "%d.%d\t%s\n", n, part, line[:k])
		line = line[k:]
	}
	if dropped > 0 {
		fmt.Fprintf(&b, "%d\t... [line cut: %d more bytes]\n", n, dropped)
	}
	return b.String()
}

// readLine returns the next line without its line ending, cut to
// maxLineKeep bytes; dropped counts the bytes left out. more is false at
// the end of the input.
func readLine(br *bufio.Reader) (line string, dropped int, more bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1] // the newline
		}
		keep := min(max(maxLineKeep-len(buf), 0), len(chunk))
		buf = append(buf, chunk[:keep]...)
		dropped += len(chunk) - keep
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !errors.Is(err, io.EOF) {
			return "", 0, false, err
		}
		if len(buf) == 0 && dropped == 0 {
			return "", 0, false, nil
		}
		break
	}
	s := strings.TrimSuffix(string(buf), "\r")
	if dropped > 0 {
		s = string(tool.TrimPartialRune([]byte(s)))
	}
	return s, dropped, true, nil
}
