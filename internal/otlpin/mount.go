package otlpin

import (
	"context"
	"errors"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/httpapi"
)

// Exporter is the httpapi.TracesExporter of an Ingester.
type Exporter struct {
	Ingester Ingester
	// Limits bound each request (zero fields: DefaultLimits).
	Limits Limits
}

// Export implements httpapi.TracesExporter: TooLarge for a request past
// MaxSpans, Invalid naming the part of a request refused whole by another
// limit or not a request at all.
func (x Exporter) Export(ctx context.Context, body []byte, isJSON bool, c evaluation.Caller) ([]byte, error) {
	d, err := Decode(body, isJSON, x.Limits)
	var le *LimitError
	var te *TextError
	switch {
	case errors.As(err, &te):
		return nil, errs.Fields("invalid text", []errs.FieldError{{Path: te.Path, Message: "is not valid UTF-8 (or holds an unpaired surrogate escape)"}})
	case errors.As(err, &le) && le.TooLarge:
		return nil, errs.E(errs.TooLarge, "%s", le.Message)
	case errors.As(err, &le):
		return nil, errs.Fields("the export request breaks a limit", []errs.FieldError{{Path: le.Path, Message: le.Message}})
	case err != nil:
		return nil, errs.Fields("not an OTLP export request", []errs.FieldError{{Path: "body", Message: err.Error()}})
	}
	res, err := x.Ingester.Export(ctx, d, c)
	if err != nil {
		return nil, err
	}
	return Response(res.Rejected, res.Message, isJSON), nil
}

// Mount makes h receive OTLP traces at POST /v1/traces, appending their
// events with h's evaluation service, within cfg (zero fields: defaults).
func Mount(h *httpapi.Handler, cfg Config) {
	if h.Eval != nil {
		h.Traces = Exporter{Ingester: Ingester{Eval: h.Eval}, Limits: cfg.Limits}
		h.SetTracesLimits(cfg.Bounds)
	}
}
