package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// grepBatch is how many files the Go search reads in parallel before it
// reports them in order.
const grepBatch = 256

// searchGo is the search without ripgrep: a walk, then the files read in
// parallel batches and reported in path order.
func searchGo(ctx context.Context, q *grepQuery, fn func(string, []grepMatch) bool) error {
	files, err := listFiles(ctx, q)
	if err != nil {
		return err
	}
	pre, err := regexp.Compile("(?m)" + q.re.String())
	if err != nil {
		return err
	}
	literal := []byte(nil)
	if !q.regex && !q.ignoreCase {
		literal = []byte(q.pattern)
	}
	workers := max(runtime.GOMAXPROCS(0), 1)
	results := make([][]grepMatch, grepBatch)
	for start := 0; start < len(files); start += grepBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := files[start:min(start+grepBatch, len(files))]
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(workers, len(batch)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					results[i] = searchFile(q, pre, literal, batch[i])
				}
			}()
		}
		for i := range batch {
			next <- i
		}
		close(next)
		wg.Wait()
		for i := range batch {
			if len(results[i]) > 0 && !fn(results[i][0].path, results[i]) {
				return nil
			}
			results[i] = nil
		}
	}
	return nil
}

// listFiles returns the regular files under the query's target, skipping
// .git and symlinks, sorted by workspace-relative path.
func listFiles(ctx context.Context, q *grepQuery) ([]string, error) {
	st, err := os.Stat(q.target)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{q.target}, nil
	}
	var files []string
	err = filepath.WalkDir(q.target, func(path string, d fs.DirEntry, err error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err != nil {
			return nil
		}
		if d.Name() == ".git" && path != q.target {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			files = append(files, path)
		}
		return nil
	})
	slices.SortFunc(files, func(a, b string) int { return strings.Compare(q.relPath(a), q.relPath(b)) })
	return files, err
}

// searchFile returns the matching lines of one file; none for a binary
// file or one that cannot be read.
func searchFile(q *grepQuery, pre *regexp.Regexp, literal []byte, path string) []grepMatch {
	data, err := os.ReadFile(path)
	if err != nil || bytes.IndexByte(data, 0) >= 0 {
		return nil
	}
	if literal != nil && !bytes.Contains(data, literal) || literal == nil && !pre.Match(data) {
		return nil
	}
	rel := q.relPath(path)
	var out []grepMatch
	for n := 1; len(data) > 0; n++ {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if q.re.Match(line) {
			out = append(out, grepMatch{path: rel, line: n, text: lineText(line)})
		}
	}
	return out
}

func lineText(line []byte) string {
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	return strings.ToValidUTF8(string(line), "\uFFFD")
}

// rgMessage is the part of ripgrep's --json output grep uses.
type rgMessage struct {
	Type string `json:"type"`
	Data struct {
		Path         rgText `json:"path"`
		Lines        rgText `json:"lines"`
		LineNumber   int    `json:"line_number"`
		BinaryOffset *int64 `json:"binary_offset"`
	} `json:"data"`
}

type rgText struct {
	Text  *string `json:"text"`
	Bytes string  `json:"bytes"`
}

func (t rgText) raw() []byte {
	if t.Text != nil {
		return []byte(*t.Text)
	}
	b, _ := base64.StdEncoding.DecodeString(t.Bytes)
	return b
}

// ripgrep returns the search that runs rg (at path rg) with --json, in
// parallel, and reports its files sorted by path as searchGo does.
func ripgrep(rg string) searcher {
	return func(ctx context.Context, q *grepQuery, fn func(string, []grepMatch) bool) error {
		args := []string{"--json", "--no-config", "--hidden", "--no-ignore", "--no-messages",
			"--glob", "!.git", "--regexp", q.re.String(), "--", q.target}
		if !q.regex {
			args = []string{"--json", "--no-config", "--hidden", "--no-ignore", "--no-messages",
				"--glob", "!.git", "--fixed-strings", "--regexp", q.pattern, "--", q.target}
			if q.ignoreCase {
				args = append([]string{"--ignore-case"}, args...)
			}
		}
		cmd := exec.CommandContext(ctx, rg, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		byFile, perr := parseRg(stdout, q)
		werr := cmd.Wait()
		if err := ctx.Err(); err != nil {
			return err
		}
		if perr != nil {
			return perr
		}
		var exitErr *exec.ExitError
		if werr != nil && (!errors.As(werr, &exitErr) || exitErr.ExitCode() != 1) {
			return fmt.Errorf("rg: %v: %s", werr, strings.TrimSpace(stderr.String()))
		}
		names := make([]string, 0, len(byFile))
		for name := range byFile {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if !fn(name, byFile[name]) {
				return nil
			}
		}
		return nil
	}
}

// parseRg reads rg's JSON lines into matches per file, dropping binary
// files.
func parseRg(r interface{ Read([]byte) (int, error) }, q *grepQuery) (map[string][]grepMatch, error) {
	byFile := map[string][]grepMatch{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var m rgMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("parse rg output: %v", err)
		}
		rel := q.relPath(string(m.Data.Path.raw()))
		switch m.Type {
		case "match":
			byFile[rel] = append(byFile[rel], grepMatch{path: rel, line: m.Data.LineNumber, text: lineText(m.Data.Lines.raw())})
		case "end":
			if m.Data.BinaryOffset != nil {
				delete(byFile, rel)
			}
		}
	}
	return byFile, sc.Err()
}
