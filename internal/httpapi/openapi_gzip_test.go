package httpapi

import (
	"bytes"
	"compress/gzip"
	"flag"
	"os"
	"testing"
)

var updateOpenAPI = flag.Bool("update-openapi", false, "write openapi.json.gz from openapi.json")

// TestOpenAPICompressed: the document the binaries carry (openapi.json.gz)
// is openapi.json, the source every other test reads. After editing
// openapi.json: go test ./internal/httpapi -run TestOpenAPICompressed -update-openapi
func TestOpenAPICompressed(t *testing.T) {
	src, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if *updateOpenAPI {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(src)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("openapi.json.gz", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("wrote openapi.json.gz; rebuild to serve it")
		return
	}
	if !bytes.Equal(OpenAPI, src) {
		t.Fatal("openapi.json.gz is not openapi.json: run go test ./internal/httpapi -run TestOpenAPICompressed -update-openapi")
	}
}
