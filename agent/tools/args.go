package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// decodeArgs unmarshals the model's arguments into v. Missing or null
// arguments decode as an empty object; unknown fields are ignored.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}

func missing(field string) Result {
	return Result{Err: fmt.Sprintf("missing required argument %q", field)}
}

func failed(format string, a ...any) Result {
	return Result{Err: fmt.Sprintf(format, a...)}
}
