// Package web holds the browser page the bridge serves at / (docs/web.md):
// the bundle esbuild built from src/ into dist/, embedded so that
// `go build` needs no Node. `make web` (npm run build) rebuilds dist/, and
// its check-bundle step fails when the committed bundle is out of date.
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
