package cli

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxHistory is how many lines of input the history keeps.
const maxHistory = 1000

// history is the line editor's history (lineHistory),
// loaded from and appended to a file, one entry a line. It is used by the
// editor's goroutine only.
type history struct {
	path    string
	entries []string // oldest first
	err     error    // the first failed save, reported once
}

// loadHistory reads path; a missing file is an empty history. An empty
// path keeps the history in memory only.
func loadHistory(path string) *history {
	h := &history{path: path}
	if path == "" {
		return h
	}
	f, err := os.Open(path)
	if err != nil {
		return h
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			h.entries = append(h.entries, line)
		}
	}
	if len(h.entries) > maxHistory {
		h.entries = h.entries[len(h.entries)-maxHistory:]
	}
	return h
}

// Add records a line (not blank, not a repeat of the last one) and
// appends it to the file.
func (h *history) Add(entry string) {
	entry = strings.TrimSpace(entry)
	if entry == "" || strings.ContainsAny(entry, "\r\n") {
		return
	}
	if n := len(h.entries); n > 0 && h.entries[n-1] == entry {
		return
	}
	h.entries = append(h.entries, entry)
	if len(h.entries) > maxHistory {
		h.entries = h.entries[1:]
	}
	if h.path == "" || h.err != nil {
		return
	}
	h.err = appendLine(h.path, entry)
}

// Len is the number of entries.
func (h *history) Len() int { return len(h.entries) }

// At returns entry idx, 0 being the most recent.
func (h *history) At(idx int) string { return h.entries[len(h.entries)-1-idx] }

// appendLine appends line to the file at path, creating it (and its
// folder) private to the user.
func appendLine(path, line string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}
