package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// --store (BOXWIRE_STORE) takes the bbolt file the server opens or a
// postgres:// URL, which is parsed (a bad one refused without its
// password) and kept for the server.
func TestStoreOption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		flag, env, wantErr, want string
	}{
		{"", "", "", ""},
		{filepath.Join(dir, "boxwire.db"), "", "", ""},
		{"", filepath.Join(dir, ".", "boxwire.db"), "", ""},
		{filepath.Join(dir, "other.db"), "", "the store file is <data-dir>/boxwire.db", ""},
		{"postgres://boxwire:secret@db.example:5432/boxwire", "", "", "postgres://boxwire:secret@db.example:5432/boxwire"},
		{"", "postgresql://db.example/boxwire?sslmode=require", "", "postgresql://db.example/boxwire?sslmode=require"},
		{"postgres://boxwire:secret@db.example:port/x", "", "--store: ", ""},
	} {
		args := []string{"--data-dir", dir}
		if tc.flag != "" {
			args = append(args, "--store", tc.flag)
		}
		getenv := func(k string) string {
			if k == "BOXWIRE_STORE" {
				return tc.env
			}
			return ""
		}
		o, err := parseOptions("bridge", args, getenv)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("--store %q, env %q: %v", tc.flag, tc.env, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("--store %q, env %q: error %v; want %q", tc.flag, tc.env, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("the error shows the password: %v", err)
		case err == nil && o.store != tc.want:
			t.Errorf("--store %q, env %q: kept %q; want %q", tc.flag, tc.env, o.store, tc.want)
		}
	}
}
