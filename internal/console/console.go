// Package console is the web console's static files, embedded in the
// binaries that serve it (the local server and the API Lambda) at /console.
// The files are plain HTML, CSS and JavaScript modules with no third-party
// code; the console reads everything through the authenticated JSON API
// with a bearer token kept in sessionStorage (see ui/app.js).
package console

import (
	"embed"
	"path"
	"strings"
)

//go:embed ui
var files embed.FS

// Assets serves the embedded files to httpapi.Handler.Console.
type Assets struct{}

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

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
	b, err := files.ReadFile("ui/" + name)
	if err != nil {
		return nil, "", false
	}
	return b, ctype, true
}
