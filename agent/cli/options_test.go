package cli

// An internal test: package main cannot be imported.

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/boxwire/boxwire/agent/loop"
	"github.com/boxwire/boxwire/agent/tools"
)

// limits is what a test compares of options.
type limits struct {
	MaxSteps, Budget, OutputLimit int
	OutputDirLimit                int64
	ExecTimeout, MaxExecTimeout   time.Duration
	InputIdle                     time.Duration
}

func limitsOf(o options) limits {
	return limits{
		MaxSteps: o.loop.MaxSteps, Budget: o.loop.Budget,
		OutputLimit: o.tools.OutputLimit, OutputDirLimit: o.tools.OutputDirLimit,
		ExecTimeout: o.tools.ExecTimeout, MaxExecTimeout: o.tools.MaxExecTimeout,
		InputIdle: o.tools.InputIdle,
	}
}

var defaults = limits{
	MaxSteps: loop.DefaultMaxSteps, Budget: loop.DefaultBudget,
	OutputLimit: tools.DefaultOutputLimit, OutputDirLimit: tools.DefaultOutputDirLimit,
	ExecTimeout: tools.DefaultExecTimeout, MaxExecTimeout: tools.DefaultMaxExecTimeout,
	InputIdle: tools.DefaultInputIdle,
}

func TestParseOptionsLimits(t *testing.T) {
	with := func(f func(*limits)) limits { l := defaults; f(&l); return l }
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want limits
	}{
		{"defaults", nil, nil, defaults},
		{"flags", []string{"--max-steps=7", "--context-budget", "2000", "--exec-timeout=5s", "--max-exec-timeout=1m", "--input-idle=1s", "--output-limit=8K", "--output-dir-limit=1MiB"}, nil,
			limits{MaxSteps: 7, Budget: 2000, ExecTimeout: 5 * time.Second, MaxExecTimeout: time.Minute, InputIdle: time.Second, OutputLimit: 8 << 10, OutputDirLimit: 1 << 20}},
		{"environment", nil, map[string]string{
			"BOXWIRE_MAX_STEPS": "12", "BOXWIRE_CONTEXT_BUDGET": "50_000", "BOXWIRE_EXEC_TIMEOUT": "30s",
			"BOXWIRE_MAX_EXEC_TIMEOUT": "20m", "BOXWIRE_INPUT_IDLE": "500ms", "BOXWIRE_OUTPUT_LIMIT": "4096", "BOXWIRE_OUTPUT_DIR_LIMIT": "2G",
		}, limits{MaxSteps: 12, Budget: 50_000, ExecTimeout: 30 * time.Second, MaxExecTimeout: 20 * time.Minute, InputIdle: 500 * time.Millisecond, OutputLimit: 4096, OutputDirLimit: 2 << 30}},
		{"flag over environment", []string{"--max-steps=3"}, map[string]string{"BOXWIRE_MAX_STEPS": "12"},
			with(func(l *limits) { l.MaxSteps = 3 })},
		{"size with space and lower case", []string{"--output-limit", "16 k"}, nil,
			with(func(l *limits) { l.OutputLimit = 16 << 10 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatalf("parseOptions: %v", err)
			}
			if got := limitsOf(o); got != tt.want {
				t.Errorf("limits\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseOptionsRejects(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // a part of the error
	}{
		{"zero steps flag", []string{"--max-steps=0"}, nil, "more than zero"},
		{"negative budget", []string{"--context-budget=-5"}, nil, "more than zero"},
		{"steps not a number", []string{"--max-steps=many"}, nil, "whole number"},
		{"bad duration", []string{"--exec-timeout=5"}, nil, "duration"},
		{"bad size suffix", []string{"--output-limit=5T"}, nil, "size"},
		{"size too large", []string{"--output-dir-limit=9999999999G"}, nil, "too large"},
		{"bad variable", nil, map[string]string{"BOXWIRE_MAX_STEPS": "ten"}, "BOXWIRE_MAX_STEPS"},
		{"zero variable", nil, map[string]string{"BOXWIRE_INPUT_IDLE": "0s"}, "BOXWIRE_INPUT_IDLE"},
		{"timeout above its cap", []string{"--exec-timeout=20m"}, nil, "above --max-exec-timeout"},
		{"stray argument", []string{"serve"}, nil, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOptions(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("parseOptions(%q, %v) = %v, want an error with %q", tt.args, tt.env, err, tt.wantErr)
			}
		})
	}
}

func TestParseOptionsConnection(t *testing.T) {
	env := map[string]string{"BOXWIRE_LISTEN": "unix:/run/a.sock", "BOXWIRE_TOKEN": "s3cret", "BOXWIRE_TERMINAL_IDLE": "bogus", "BOXWIRE_MAX_FILE_BYTES": "10"}
	o, err := parseOptions([]string{"--workspace=/w"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.listen != "unix:/run/a.sock" || o.token != "s3cret" || o.workspace != "/w" || o.maxFileBytes != 10 {
		t.Errorf("options = %+v", o)
	}
	if o.termIdle <= 0 { // an invalid BOXWIRE_TERMINAL_IDLE keeps the default, as before
		t.Errorf("termIdle = %v", o.termIdle)
	}
}
