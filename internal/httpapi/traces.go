package httpapi

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/jsonwalk"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
)

// TracesExporter ingests an OTLP/HTTP traces export request
// (internal/otlpin.Mount sets it): body is the request, decompressed;
// isJSON says OTLP JSON rather than protobuf. It returns the encoded
// ExportTraceServiceResponse. Errors: Invalid when the body is not a
// request; a store error otherwise.
type TracesExporter interface {
	Export(ctx context.Context, body []byte, isJSON bool, c evaluation.Caller) ([]byte, error)
}

// Bounds of an OTLP export request: as sent, and decompressed.
const (
	MaxTracesBody         = 4 << 20
	MaxTracesDecompressed = 16 << 20
)

// traces serves POST /v1/traces, the OTLP/HTTP traces endpoint.
func (h *Handler) traces(w http.ResponseWriter, r *http.Request) error {
	if h.Traces == nil {
		return errs.E(errs.NotFound, "this server does not receive OTLP traces here")
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	isJSON := mt == "application/json"
	if !isJSON && mt != "application/x-protobuf" {
		return errs.Fields("unsupported content type", []errs.FieldError{{Path: "Content-Type", Message: "must be application/x-protobuf or application/json (OTLP/HTTP)"}})
	}
	var body io.Reader = http.MaxBytesReader(nil, r.Body, MaxTracesBody)
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return tooLargeOr(err, errs.Fields("bad encoding", []errs.FieldError{{Path: "Content-Encoding", Message: "the body is not gzip"}}))
		}
		defer zr.Close()
		body = io.LimitReader(zr, MaxTracesDecompressed+1)
	default:
		return errs.Fields("unsupported encoding", []errs.FieldError{{Path: "Content-Encoding", Message: "must be gzip or none"}})
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return tooLargeOr(err, errs.Fields("bad body", []errs.FieldError{{Path: "body", Message: "could not be read: " + err.Error()}}))
	}
	if len(b) > MaxTracesDecompressed {
		return errs.E(errs.TooLarge, "the export request is over %d MB decompressed; export smaller batches", MaxTracesDecompressed>>20)
	}
	// OTLP/JSON is JSON, whose text is UTF-8: protojson (and encoding/json)
	// would take bytes that are not, replaced by U+FFFD, into a span's
	// name or attributes; the protobuf path refuses them already.
	if isJSON {
		if path, bad := jsonwalk.InvalidString(b); bad {
			return errs.Fields("invalid text", []errs.FieldError{{Path: path, Message: "is not valid UTF-8 (or holds an unpaired surrogate escape)"}})
		}
	}
	out, err := h.Traces.Export(r.Context(), b, isJSON, callerCtx(r.Context()))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", mt)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return nil
}

// tooLargeOr is a 413 when err is the body limit, else other.
func tooLargeOr(err error, other error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errs.E(errs.TooLarge, "the export request is over %d MB; export smaller batches", MaxTracesBody>>20)
	}
	return other
}

// NewTraces builds a handler that serves POST /v1/traces alone, with the
// authentication and errors of New, for the AWS ingest function (New would
// link every route into a bootstrap that has room for the OTLP decoder
// only). Mount an exporter on it (internal/otlpin.Mount) before serving.
func NewTraces(eval *evaluation.Service, a Authenticator, log *slog.Logger) *Handler {
	h := &Handler{Eval: eval, Auth: a, Log: log, MaxBody: DefaultMaxBody}
	mux := http.NewServeMux()
	const pattern = "POST /v1/traces"
	mux.Handle(pattern, h.authed(auth.EventsWrite, checkText(pattern, h.traces)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, h.Log, errs.E(errs.NotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	h.mux, h.patterns = mux, []string{pattern}
	return h
}
