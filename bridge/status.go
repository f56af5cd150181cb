package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
)

// runStatus prints the bridges that share the store and the threads each
// relays, from their leases (docs/store.md, "Leases"): `bridge status
// --store postgres://…`. A bbolt store belongs to one bridge, which keeps
// its leases in memory; there it says whether a bridge has the file.
func runStatus(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("bridge status", flag.ContinueOnError)
	fs.SetOutput(out)
	storeURL := fs.String("store", getenv("BOXWIRE_STORE"), "the bridges' postgres:// store (default: <data-dir>/boxwire.db)")
	dataDir := fs.String("data-dir", envOr(getenv, "BOXWIRE_DATA_DIR", "/var/lib/boxwire"), "the bridge's state folder")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !pgstore.IsURL(*storeURL) {
		if err := (&options{store: *storeURL, dataDir: *dataDir}).checkStore(); err != nil {
			return err
		}
		st, err := server.OpenStore(ctx, "", *dataDir, store.Options{})
		if errors.Is(err, store.ErrLocked) {
			fmt.Fprintf(out, "a bridge runs on %s (its store file is locked; it relays all its threads)\n", *dataDir)
			return nil
		}
		if err != nil {
			return err
		}
		defer st.Close()
		fmt.Fprintf(out, "no bridge runs on %s\n", *dataDir)
		return nil
	}
	st, err := pgstore.Open(ctx, *storeURL, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	leases, err := st.Leases(ctx)
	if err != nil {
		return err
	}
	printLeases(out, leases, time.Now())
	return nil
}

// printLeases prints the bridges (their own leases, bridge/<id>) with how
// many threads each relays, then each thread's lease.
func printLeases(out io.Writer, leases []store.Lease, now time.Time) {
	threads := map[string]int{}
	var bridges, relayed []store.Lease
	for _, l := range leases {
		if id, ok := strings.CutPrefix(l.Thread, "bridge/"); ok {
			l.Thread = id
			bridges = append(bridges, l)
			continue
		}
		relayed = append(relayed, l)
		threads[l.Holder]++
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintln(tw, "BRIDGE\tPROCESS\tTHREADS\tLEASE EXPIRES IN")
	for _, b := range bridges {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", b.Thread, strings.TrimPrefix(b.Holder, b.Thread+"/"), threads[b.Thread], left(b.Expires, now))
	}
	if len(bridges) == 0 {
		fmt.Fprintln(tw, "(none running)\t\t\t")
	}
	fmt.Fprintln(tw, "\nTHREAD\tRELAYED BY\tEPOCH\tLEASE EXPIRES IN")
	for _, l := range relayed {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", l.Thread, l.Holder, l.Epoch, left(l.Expires, now))
	}
}

func left(t, now time.Time) string { return t.Sub(now).Round(100 * time.Millisecond).String() }
