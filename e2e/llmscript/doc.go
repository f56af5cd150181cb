// Package llmscript is a scripted, OpenAI-compatible chat-completions server:
// the project's only stand-in for a paid LLM.
//
// A [Script] (JSON, see [Parse]) lists turns; each turn is a sequence of
// steps the "model" answers with — text, tool calls or an HTTP error. The
// server is stateless: the turn is chosen by the last user message of each
// request and the step by the number of assistant messages after it, so any
// number of conversations can run at once against one [Server].
//
// The [Server] speaks the real wire format, so the real
// github.com/sashabaranov/go-openai client (or any other OpenAI client)
// talks to it unchanged:
//
//   - POST /v1/chat/completions (also /chat/completions), either a full
//     chat.completion object or, with "stream": true, server-sent events of
//     chat.completion.chunk objects ending in "data: [DONE]". Text streams in
//     several small chunks; tool calls stream as indexed deltas whose
//     arguments text is split across chunks; with
//     "stream_options": {"include_usage": true} a last chunk with usage and
//     no choices precedes [DONE].
//   - GET /v1/models (also /models) and GET /v1/models/{id}.
//
// Errors use the OpenAI body shape {"error":{"message","type","param","code"}}.
// With [Options.APIKey] set every request must carry
// "Authorization: Bearer <key>" or is answered 401.
//
// Every request is recorded (see [Server.Requests]) so tests can check what
// a proxy or an agent actually sent.
package llmscript
