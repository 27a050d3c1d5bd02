package httpapi

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/agentclock/clockwork/internal/auth"

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

// TracesLimits bound OTLP export requests: bytes as sent and
// decompressed, and requests read and decoded at once (a request beyond
// them waits up to QueueWait for a slot, then gets 429 with
// Retry-After, the OTLP/HTTP way to throttle an exporter). With the
// defaults, the requests at once hold at most Concurrent x (Decompressed +
// its decoding) of memory.
type TracesLimits struct {
	Body, Decompressed, Concurrent int
	// QueueWait is how long a request waits for a slot (zero:
	// DefaultTracesQueueWait).
	QueueWait time.Duration
}

// DefaultTracesLimits are the bounds of a server that sets none.
func DefaultTracesLimits() TracesLimits {
	return TracesLimits{Body: 4 << 20, Decompressed: 16 << 20, Concurrent: 4}
}

// DefaultTracesQueueWait is how long an export request waits for a slot.
const DefaultTracesQueueWait = 5 * time.Second

// SetTracesLimits sets the bounds of POST /v1/traces (zero fields:
// defaults). Call it before serving.
func (h *Handler) SetTracesLimits(l TracesLimits) {
	d := DefaultTracesLimits()
	if l.Body <= 0 {
		l.Body = d.Body
	}
	if l.Decompressed <= 0 {
		l.Decompressed = d.Decompressed
	}
	if l.Concurrent <= 0 {
		l.Concurrent = d.Concurrent
	}
	if l.QueueWait <= 0 {
		l.QueueWait = DefaultTracesQueueWait
	}
	h.tracesLimits, h.tracesSlots = l, make(chan struct{}, l.Concurrent)
}

// takeTracesSlot waits for a slot of the exports at once; release it with
// the function returned. Errors: TooManyRequests after QueueWait.
func (h *Handler) takeTracesSlot(ctx context.Context) (func(), error) {
	h.tracesOnce.Do(func() {
		if h.tracesSlots == nil {
			h.SetTracesLimits(TracesLimits{})
		}
	})
	select {
	case h.tracesSlots <- struct{}{}:
		return func() { <-h.tracesSlots }, nil
	default:
	}
	t := time.NewTimer(h.tracesLimits.QueueWait)
	defer t.Stop()
	select {
	case h.tracesSlots <- struct{}{}:
		return func() { <-h.tracesSlots }, nil
	case <-t.C:
		return nil, errs.E(errs.TooManyRequests, "%d export requests are being received at once, this server's limit; retry after the Retry-After delay", cap(h.tracesSlots))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

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
	release, err := h.takeTracesSlot(r.Context())
	if err != nil {
		return err
	}
	defer release()
	limits := h.tracesLimits
	var body io.Reader = http.MaxBytesReader(nil, r.Body, int64(limits.Body))
	switch r.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return tooLargeOr(err, limits, errs.Fields("bad encoding", []errs.FieldError{{Path: "Content-Encoding", Message: "the body is not gzip"}}))
		}
		defer zr.Close()
		body = io.LimitReader(zr, int64(limits.Decompressed)+1)
	default:
		return errs.Fields("unsupported encoding", []errs.FieldError{{Path: "Content-Encoding", Message: "must be gzip or none"}})
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return tooLargeOr(err, limits, errs.Fields("bad body", []errs.FieldError{{Path: "body", Message: "could not be read: " + err.Error()}}))
	}
	if len(b) > limits.Decompressed {
		return errs.E(errs.TooLarge, "the export request is over %d bytes decompressed, this server's limit; export smaller batches", limits.Decompressed)
	}
	// (The exporter checks the body's text as it scans it: OTLP/JSON is
	// JSON, whose text is UTF-8.)
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
func tooLargeOr(err error, l TracesLimits, other error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errs.E(errs.TooLarge, "the export request is over %d bytes, this server's limit; export smaller batches", l.Body)
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
