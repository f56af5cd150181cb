// Command benchcmp compares `make bench` runs (the JSON files it writes
// under build/):
//
//	benchcmp -old 'a.json [b.json …]' -new 'c.json [d.json …]'
//
// Each side may be several runs (separated by spaces or commas): their
// samples count together. It prints each figure's old and new value with
// the interquartile range of its samples, the change, and whether the
// change is beyond that spread (e2e/benchcmp). `make bench-compare
// OLD=… NEW=…` runs it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/boxwire/boxwire/e2e/benchcmp"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "benchcmp:", err)
		}
		os.Exit(2)
	}
}

// run parses args, reads both sides' runs and prints their comparison.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchcmp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	oldFiles := fs.String("old", "", "the old runs' JSON `files`, separated by spaces or commas")
	newFiles := fs.String("new", "", "the new runs' JSON `files`, separated by spaces or commas")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (use -old and -new)", fs.Args())
	}
	old, err := readAll(*oldFiles)
	if err != nil {
		return fmt.Errorf("-old: %w", err)
	}
	cur, err := readAll(*newFiles)
	if err != nil {
		return fmt.Errorf("-new: %w", err)
	}
	benchcmp.Print(stdout, old, cur, benchcmp.Compare(old, cur))
	return nil
}

// readAll reads the runs of a list of files.
func readAll(list string) ([]benchcmp.Run, error) {
	paths := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' })
	if len(paths) == 0 {
		return nil, errors.New("no files given")
	}
	runs := make([]benchcmp.Run, 0, len(paths))
	for _, p := range paths {
		r, err := benchcmp.Read(p)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}
