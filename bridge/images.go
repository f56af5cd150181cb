package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/boxwire/boxwire/bridge/fleet"
)

// imagesUsage is the help of bridge images.
const imagesUsage = `usage: bridge images [--url URL] [--token TOKEN]
lists the images a running bridge's sandboxes use, how many threads and
sandboxes run each, how many are behind a newer build, and the rollout's
pace (GET /v1/rollout). It asks the running bridge only: with no bridge
running there are no sandboxes to count.`

// runImages runs "bridge images" against the running bridge at --url
// (BOXWIRE_URL, else http://$BOXWIRE_BRIDGE_LISTEN) with an admin
// credential (--token, BOXWIRE_TOKEN), writing a table to out.
func runImages(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("bridge images", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprintln(out, imagesUsage); fs.PrintDefaults() }
	urlFlag := fs.String("url", getenv("BOXWIRE_URL"), "the running bridge's URL (default http://$BOXWIRE_BRIDGE_LISTEN)")
	token := fs.String("token", getenv("BOXWIRE_TOKEN"), "an admin credential for the running bridge")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bridge images takes no arguments, got %q\n%s", fs.Args(), imagesUsage)
	}
	if *token == "" {
		return errors.New("bridge images asks the running bridge: set --token or BOXWIRE_TOKEN to an admin credential")
	}
	base := *urlFlag
	if base == "" {
		base = "http://" + envOr(getenv, "BOXWIRE_BRIDGE_LISTEN", "127.0.0.1:7420")
	}
	st, err := getRollout(ctx, base, *token)
	if err != nil {
		return err
	}
	pace := "all at once"
	if st.Batch > 0 {
		pace = fmt.Sprintf("%d per %s", st.Batch, st.Interval)
	}
	state := "running"
	if st.Paused {
		state = "paused"
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tIMAGE ID\tTHREADS\tSANDBOXES\tBEHIND\tPOOLED")
	for _, im := range st.Images {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", im.Image, shortID(im.ImageID), im.Threads, im.Sandboxes, im.Behind, im.Pooled)
	}
	fmt.Fprintf(tw, "rollout %s, %s\n", state, pace)
	return tw.Flush()
}

// getRollout is GET /v1/rollout of the bridge at base.
func getRollout(ctx context.Context, base, token string) (fleet.RolloutStatus, error) {
	var st fleet.RolloutStatus
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := strings.TrimSuffix(base, "/") + "/v1/rollout"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return st, fmt.Errorf("bridge images: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("bridge images: is a bridge running at %s? %w", base, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("bridge images: GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(raw)))
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("bridge images: GET %s: %w", u, err)
	}
	return st, nil
}

// shortID is an image id as docker images shows it: 12 hex digits.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	if id == "" {
		return "-"
	}
	return id
}
