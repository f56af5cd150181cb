// Package web is the browser side of the bridge (docs/web.md): the page
// it serves at / — the bundle esbuild built from src/ into dist/,
// embedded so that `go build` needs no Node — and the browser sessions
// (login.go, session.go) that let the page use the API with a cookie
// instead of a bearer key. The server mounts [Sessions.Routes] and asks
// [Sessions.Authenticate] who each request comes from. `make web` (npm
// run build) rebuilds dist/, and its check-bundle step fails when the
// committed bundle is out of date.
package web

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Assets are the page's files: index.html, app.js, app.css.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern above names dist: cannot happen
	}
	return sub
}
