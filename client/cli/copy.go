package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/boxwire/boxwire/bridge/wire"
	"github.com/boxwire/boxwire/client/chat"
)

// Copy runs "client cp SRC DST": exactly one of them is THREAD:PATH (":PATH"
// for a standalone agent). SRC is copied *into* the folder DST: an upload
// of ./proj to t_1:dest makes dest/proj; a download of t_1:proj to ./out
// makes ./out/proj. progress, if not nil, gets a progress bar (pass a
// terminal). It returns ExitOK, ExitTurnFailed when some files failed
// (each is listed on o.Err), or ExitUsage for bad arguments and refused
// or failed requests.
func Copy(ctx context.Context, o Options, args []string, progress io.Writer) int {
	if o.Err == nil {
		o.Err = io.Discard
	}
	if len(args) != 2 {
		fmt.Fprintln(o.Err, "usage: client cp LOCAL THREAD:PATH | client cp THREAD:PATH LOCAL")
		return ExitUsage
	}
	src, srcRemote := parseRemote(args[0])
	dst, dstRemote := parseRemote(args[1])
	var res wire.TransferResult
	var err error
	switch {
	case srcRemote == dstRemote:
		fmt.Fprintln(o.Err, "boxwire: cp needs exactly one THREAD:PATH argument")
		return ExitUsage
	case dstRemote:
		res, err = upload(ctx, o.Chat, args[0], dst, progress)
	default:
		res, err = download(ctx, o.Chat, src, args[1], progress)
	}
	return reportTransfer(o.Err, res, err)
}

// reportTransfer prints failures and maps a transfer's outcome to an exit
// code (see Copy).
func reportTransfer(w io.Writer, res wire.TransferResult, err error) int {
	for _, f := range res.Files {
		if f.Code != "" {
			fmt.Fprintf(w, "boxwire: %s: %s: %s\n", f.Path, f.Code, f.Message)
		}
	}
	switch {
	case err == nil && res.Failed > 0:
		fmt.Fprintf(w, "boxwire: %d of %d entries failed\n", res.Failed, res.Failed+res.Count)
		return ExitTurnFailed
	case errors.Is(err, chat.ErrTransferIncomplete):
		fmt.Fprintf(w, "boxwire: %v\n", err)
		return ExitTurnFailed
	case err != nil:
		fmt.Fprintf(w, "boxwire: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(w, "boxwire: %d entries, %s\n", res.Count, mib(res.Bytes))
	return ExitOK
}

// transferCommand runs /upload LOCAL [PATH] and /download PATH [LOCAL] in
// the chat, against the connected thread.
func (s *session) transferCommand(ctx context.Context, cmd string, args []string) {
	thread := s.conn.Thread()
	if s.conn.Server().Role == wire.RoleAgent {
		thread = ""
	}
	var res wire.TransferResult
	var err error
	switch {
	case cmd == "/upload" && (len(args) == 1 || len(args) == 2):
		dest := "."
		if len(args) == 2 {
			dest = args[1]
		}
		res, err = upload(ctx, s.o.Chat, args[0], chat.FileTransfer{Thread: thread, Path: dest}, s.o.Progress)
	case cmd == "/download" && (len(args) == 1 || len(args) == 2):
		local := "."
		if len(args) == 2 {
			local = args[1]
		}
		res, err = download(ctx, s.o.Chat, chat.FileTransfer{Thread: thread, Path: args[0]}, filepath.Clean(local), s.o.Progress)
	default:
		s.r.Printf("usage: /upload LOCAL [WORKSPACE_FOLDER] | /download WORKSPACE_PATH [LOCAL_FOLDER]")
		return
	}
	reportTransfer(s.o.Err, res, err)
}
