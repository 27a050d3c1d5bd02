package otlpin

import (
	"context"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/httpapi"
)

// Exporter is the httpapi.TracesExporter of an Ingester.
type Exporter struct{ Ingester Ingester }

// Export implements httpapi.TracesExporter.
func (x Exporter) Export(ctx context.Context, body []byte, isJSON bool, c evaluation.Caller) ([]byte, error) {
	if err := CountSpans(body, isJSON); err != nil {
		return nil, errs.E(errs.TooLarge, "%s", err.Error())
	}
	td, err := Decode(body, isJSON)
	if err != nil {
		return nil, errs.Fields("not an OTLP export request", []errs.FieldError{{Path: "body", Message: err.Error()}})
	}
	res, err := x.Ingester.Export(ctx, td, c)
	if err != nil {
		return nil, err
	}
	return Response(res.Rejected, res.Message, isJSON), nil
}

// Mount makes h receive OTLP traces at POST /v1/traces, appending their
// events with h's evaluation service.
func Mount(h *httpapi.Handler) {
	if h.Eval != nil {
		h.Traces = Exporter{Ingester: Ingester{Eval: h.Eval}}
	}
}
