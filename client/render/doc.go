// Package render turns a thread's events into terminal text: streamed
// assistant text, compact tool calls (⏺ execute(echo hello …)) with their
// live output indented below, a result line (⎿ exit 0), and clear errors.
// With Options.Color it adds ANSI styles (dim output, bold calls, red
// errors) for a terminal; without, the output is plain text for pipes and
// logs. The rendering is a pure function of the event sequence, so it is
// tested with golden files.
package render
