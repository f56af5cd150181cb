// Package httpjson writes the bridge's HTTP answers: a JSON body, and
// errors as {"error": {"code", "message"}} (wire.Error). Every package
// that serves a bridge route answers through it, so all routes answer
// alike.
package httpjson

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/boxwire/boxwire/bridge/wire"
)

// errorBody is the JSON body of an HTTP error.
type errorBody struct {
	Error wire.Error `json:"error"`
}

// Write answers status with v as its JSON body.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers status with the error code and msg (trimmed).
func Error(w http.ResponseWriter, status int, code wire.Code, msg string) {
	Write(w, status, errorBody{Error: wire.Error{Code: code, Message: strings.TrimSpace(msg)}})
}

// NotFound answers 404 not_found for thread id: a thread that does not
// exist and another user's thread get this same answer, body and all.
func NotFound(w http.ResponseWriter, id string) {
	Error(w, http.StatusNotFound, wire.CodeNotFound, fmt.Sprintf("thread %q not found", id))
}
