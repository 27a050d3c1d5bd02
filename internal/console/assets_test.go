package console

import (
	"bytes"
	"compress/gzip"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAssets = flag.Bool("update-assets", false, "rewrite gz/ from ui/")

// TestAssets checks that the embedded gz/ holds exactly the files of ui/,
// each equal to its source once decompressed (with -update-assets it
// rewrites gz/ first), and that Asset refuses what is not one of them.
func TestAssets(t *testing.T) {
	sources, err := os.ReadDir("ui")
	if err != nil {
		t.Fatal(err)
	}
	if *updateAssets {
		if err := os.RemoveAll("gz"); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll("gz", 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range sources {
			src, err := os.ReadFile(filepath.Join("ui", f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			w.Write(src)
			w.Close()
			if err := os.WriteFile(filepath.Join("gz", f.Name()+".gz"), buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Log("gz/ rewritten; build again to embed it")
		return
	}
	var names []string
	for _, f := range sources {
		names = append(names, f.Name())
		src, err := os.ReadFile(filepath.Join("ui", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, _, ok := Assets{}.Asset(f.Name())
		if !ok || !bytes.Equal(got, src) {
			t.Errorf("gz/%s.gz is not ui/%s: run go test ./internal/console -run TestAssets -update-assets", f.Name(), f.Name())
		}
	}
	embedded, _ := compressed.ReadDir("gz")
	for _, f := range embedded {
		if !slices.Contains(names, strings.TrimSuffix(f.Name(), ".gz")) {
			t.Errorf("gz/%s has no source in ui/: run go test ./internal/console -run TestAssets -update-assets", f.Name())
		}
	}
	page, ctype, ok := Assets{}.Asset("")
	if !ok || ctype != "text/html; charset=utf-8" || !bytes.Contains(page, []byte(`src="console/app.js"`)) {
		t.Errorf("the page: ok %v, %q", ok, ctype)
	}
	for _, bad := range []string{"../console.go", "gz/app.js.gz", ".hidden.js", "app.js.gz", "nothing.js", "ui/app.js", `..\app.js`} {
		if _, _, ok := (Assets{}).Asset(bad); ok {
			t.Errorf("Asset(%q) served a file", bad)
		}
	}
}
