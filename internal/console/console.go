// Package console is the web console's static files, embedded in the
// binaries that serve it (the local server and the API Lambda) at /console.
// The files are plain HTML, CSS and JavaScript modules with no third-party
// code; the console reads everything through the authenticated JSON API
// with a bearer token kept in sessionStorage (see ui/app.js).
//
// The sources are in ui/; the binaries embed their gzip-compressed copies
// in gz/ (a third of the size: the API Lambda's bootstrap has a size
// budget), made by `go test ./internal/console -run TestAssets -update-assets`
// and checked against the sources by TestAssets.
package console

import (
	"bytes"
	"compress/gzip"
	"embed"
	"io"
	"path"
	"strings"
	"sync"
)

//go:embed gz
var compressed embed.FS

// Assets serves the embedded files to httpapi.Handler.Console.
type Assets struct{}

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// opened caches each file once decompressed (a few tens of KB in all).
var opened sync.Map // name -> []byte

// Asset returns the file called name ("" is the page, index.html) and its
// media type, or false when name is not one of the console's files (a name
// with a slash, a dot file or an unknown extension never is).
func (Assets) Asset(name string) ([]byte, string, bool) {
	if name == "" {
		name = "index.html"
	}
	ctype, known := types[path.Ext(name)]
	if !known || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return nil, "", false
	}
	if b, ok := opened.Load(name); ok {
		return b.([]byte), ctype, true
	}
	gz, err := compressed.ReadFile("gz/" + name + ".gz")
	if err != nil {
		return nil, "", false
	}
	b, err := gunzip(gz)
	if err != nil {
		return nil, "", false
	}
	opened.Store(name, b)
	return b, ctype, true
}

func gunzip(gz []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
