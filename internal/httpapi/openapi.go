package httpapi

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"io"
	"net/http"
)

// OpenAPI is the OpenAPI 3.1 document of the API, served at GET
// /openapi.json without authentication. TestOpenAPIMatchesRoutes keeps its
// paths identical to the routes table. The source is openapi.json; the
// binaries carry it gzip-compressed (openapi.json.gz, 170 KB down to 19,
// which keeps the Lambda bootstraps within their size budget), and
// TestOpenAPICompressed keeps the two equal.
var OpenAPI = gunzip(openAPIGzip)

//go:embed openapi.json.gz
var openAPIGzip []byte

func gunzip(b []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		panic("httpapi: openapi.json.gz: " + err.Error())
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		panic("httpapi: openapi.json.gz: " + err.Error())
	}
	return out
}

func (h *Handler) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(OpenAPI)
	return nil
}
