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

	"github.com/boxwire/boxwire/bridge/auth"
	"github.com/boxwire/boxwire/bridge/server"
	"github.com/boxwire/boxwire/bridge/store"
	"github.com/boxwire/boxwire/bridge/store/pgstore"
)

// adminUsage is the help of the admin commands.
const adminUsage = `usage:
  bridge users add NAME [--admin]
  bridge users list
  bridge users delete NAME
  bridge keys create USER [--name N] [--expires DUR]
  bridge keys list [--user USER]
  bridge keys revoke ID
  bridge audit [--user U] [--action A] [--thread T] [--since DUR] [--limit N]
each takes --url (BOXWIRE_URL) and --token (BOXWIRE_TOKEN) for a running
bridge, or works on --store (BOXWIRE_STORE, a postgres:// URL) or
--data-dir (BOXWIRE_DATA_DIR) when none runs`

// runAdmin runs an admin command (cmd is "users", "keys" or "audit") on
// the store when no bridge holds it, or through the running bridge's
// admin API.
func runAdmin(ctx context.Context, cmd string, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("bridge "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	urlFlag := fs.String("url", getenv("BOXWIRE_URL"), "a running bridge's URL (default: the store when no bridge runs, else http://$BOXWIRE_BRIDGE_LISTEN)")
	token := fs.String("token", getenv("BOXWIRE_TOKEN"), "an admin credential for a running bridge")
	dataDir := fs.String("data-dir", envOr(getenv, "BOXWIRE_DATA_DIR", "/var/lib/boxwire"), "the bridge's state folder")
	storeURL := fs.String("store", getenv("BOXWIRE_STORE"), "the bridges' postgres:// store, worked on directly unless --url (default: <data-dir>/boxwire.db)")
	admin := fs.Bool("admin", false, "users add: the user is an admin")
	name := fs.String("name", "", "keys create: a name for the key")
	expires := fs.Duration("expires", 0, "keys create: the key expires after this long (0: never)")
	user := fs.String("user", "", "keys list, audit: only this user's")
	action := fs.String("action", "", "audit: only this action")
	thread := fs.String("thread", "", "audit: only this thread")
	since := fs.Duration("since", 0, "audit: only entries newer than this")
	limit := fs.Int("limit", 0, "audit: the newest N entries")
	words, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	a, closeAdmin, err := openAdmin(ctx, *urlFlag, *token, *dataDir, *storeURL, envOr(getenv, "BOXWIRE_BRIDGE_LISTEN", "127.0.0.1:7420"))
	if err != nil {
		return err
	}
	defer closeAdmin()
	verb := strings.Join(append([]string{cmd}, first(words, 1)...), " ")
	arg := func() (string, error) {
		if len(words) < 2 {
			return "", fmt.Errorf("%s needs an argument\n%s", verb, adminUsage)
		}
		return words[1], nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch verb {
	case "users add":
		n, err := arg()
		if err != nil {
			return err
		}
		u, err := a.AddUser(ctx, n, *admin)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "user %s added (admin: %v)\n", u.Name, u.Admin)
	case "users list":
		us, err := a.Users(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "NAME\tADMIN\tCREATED")
		for _, u := range us {
			fmt.Fprintf(tw, "%s\t%v\t%s\n", u.Name, u.Admin, u.Created.Format(time.RFC3339))
		}
	case "users delete":
		n, err := arg()
		if err != nil {
			return err
		}
		if err := a.DeleteUser(ctx, n); err != nil {
			return err
		}
		fmt.Fprintf(tw, "user %s deleted with their keys\n", n)
	case "keys create":
		u, err := arg()
		if err != nil {
			return err
		}
		key, k, err := a.CreateKey(ctx, u, *name, *expires)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\n", key)
		fmt.Fprintf(tw, "key id %s for %s; this is the only time the key is shown\n", k.ID, k.User)
	case "keys list":
		ks, err := a.Keys(ctx, *user)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "ID\tUSER\tNAME\tCREATED\tEXPIRES\tSTATE")
		for _, k := range ks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.User, k.Name, k.Created.Format(time.RFC3339), when(k.Expires), keyState(k))
		}
	case "keys revoke":
		id, err := arg()
		if err != nil {
			return err
		}
		k, err := a.RevokeKey(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "key %s of %s revoked\n", k.ID, k.User)
	case "audit":
		f := auth.AuditFilter{User: *user, Action: *action, Thread: *thread, Limit: *limit}
		if *since > 0 {
			f.Since = time.Now().Add(-*since)
		}
		es, err := a.Audit(ctx, f)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "TIME\tUSER\tACTION\tTHREAD\tDETAIL\tFROM")
		for _, e := range es {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.Format(time.RFC3339), e.User, e.Action, e.Thread, e.Detail, e.Remote)
		}
	default:
		return fmt.Errorf("unknown command %q\n%s", verb, adminUsage)
	}
	return nil
}

// openAdmin picks where the command works: the running bridge at rawURL
// when given; else the PostgreSQL store at storeURL (bridges share it: no
// lock keeps the command out; a key revoked there is refused at its next
// request, while --url also closes its open connections at once); else
// the store in dataDir; else, when a running bridge holds that file, that
// bridge at listen.
func openAdmin(ctx context.Context, rawURL, token, dataDir, storeURL, listen string) (auth.Admin, func(), error) {
	remote := func(u string) (auth.Admin, func(), error) {
		if token == "" {
			return nil, nil, errors.New("a running bridge needs an admin credential: set --token or BOXWIRE_TOKEN")
		}
		return auth.Remote{URL: u, Token: token}, func() {}, nil
	}
	if rawURL != "" {
		return remote(rawURL)
	}
	if storeURL != "" && !pgstore.IsURL(storeURL) {
		if err := (&options{store: storeURL, dataDir: dataDir}).checkStore(); err != nil {
			return nil, nil, err
		}
		storeURL = ""
	}
	st, err := server.OpenStore(ctx, storeURL, dataDir, store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return remote("http://" + listen)
	}
	if err != nil {
		return nil, nil, err
	}
	a, err := auth.New(auth.Config{AdminToken: "unused: only the store is used here", Store: st.Accounts()})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return auth.Local{A: a}, func() { st.Close() }, nil
}

// parseInterleaved parses flags that may come before, between or after
// the words, and returns the words.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return words, nil
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func first(s []string, n int) []string {
	if len(s) < n {
		return s
	}
	return s[:n]
}

func when(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

func keyState(k auth.Key) string {
	switch {
	case k.Revoked != nil:
		return "revoked " + k.Revoked.Format(time.RFC3339)
	case !k.Active(time.Now()):
		return "expired"
	}
	return "active"
}
