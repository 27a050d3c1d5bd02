package evaluation

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// Paging of GET /v1/executions/{planId}/events. A page holds at most
// MaxEventsPage events (DefaultEventsPage when the caller names no limit)
// and, past its first event, at most EventsPageBytes bytes of stored
// events, so one page fits in one AWS Lambda response (6 MB) even when
// every event is as large as the store allows (400 KB) and the adapter
// escapes the body as a JSON string.
const (
	DefaultEventsPage = 100
	MaxEventsPage     = BundlePageSize
	EventsPageBytes   = 1 << 20
)

// EventsPageRequest selects one page of a plan's events: Limit 0 means
// DefaultEventsPage; NextToken is the token of the previous page, empty for
// the first.
type EventsPageRequest struct {
	Limit     int
	NextToken string
}

// EventsPage returns one page of a plan's stored events in chain order and
// the token of the next page, empty on the last. It reads the store one
// page at a time, so its memory is bounded by one page whatever the length
// of the chain. Errors: Invalid naming "limit" for a limit outside 0 to
// MaxEventsPage and "nextToken" for a token this service did not issue for
// this plan; Internal when the store fails.
func (s *Service) EventsPage(ctx context.Context, ex *Execution, req EventsPageRequest) ([]StoredEvent, string, error) {
	if req.Limit < 0 || req.Limit > MaxEventsPage {
		return nil, "", errs.Fields("invalid listing", []errs.FieldError{{Path: "limit", Message: fmt.Sprintf("must be between 1 and %d (0 or none: %d)", MaxEventsPage, DefaultEventsPage)}})
	}
	limit := req.Limit
	if limit == 0 {
		limit = DefaultEventsPage
	}
	evs, next, err := s.readEvents(ctx, ex.pk, limit, req.NextToken)
	if errors.Is(err, store.ErrInvalid) && req.NextToken != "" {
		return nil, "", errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this service issued for this plan"}})
	}
	if err != nil {
		return nil, "", wrap(err)
	}
	if fit := fitting(evs, EventsPageBytes); fit < len(evs) {
		// Over the byte bound: read the same page again, only as long as
		// the events that fit, so the store issues the token that follows
		// the last of them.
		if evs, next, err = s.readEvents(ctx, ex.pk, fit, req.NextToken); err != nil {
			return nil, "", wrap(err)
		}
	}
	out := make([]StoredEvent, len(evs))
	for i, ev := range evs {
		out[i] = ev.StoredEvent
	}
	return out, next, nil
}

// fitting returns how many of evs, from the first, fit in max stored bytes;
// never fewer than one of a non-empty page, so every page moves forward.
func fitting(evs []sizedEvent, max int) int {
	total := 0
	for i, ev := range evs {
		total += ev.size
		if total > max && i > 0 {
			return i
		}
	}
	return len(evs)
}

// sizedEvent is a stored event with the size of its stored body.
type sizedEvent struct {
	StoredEvent
	size int
}

// readEvents is the one store read of a plan's events: up to limit events
// in chain order after the token after, and the token that follows them
// (empty at the end of the chain). A bad token is the store's error
// wrapping store.ErrInvalid.
func (s *Service) readEvents(ctx context.Context, pk string, limit int, after string) ([]sizedEvent, string, error) {
	p, err := s.store.Query(ctx, store.Query{PK: pk, SKPrefix: "EV#", Limit: limit, After: after})
	if err != nil {
		return nil, "", err
	}
	out := make([]sizedEvent, 0, len(p.Items))
	for _, it := range p.Items {
		ev, err := decode[StoredEvent](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, sizedEvent{StoredEvent: *ev, size: len(it.Data)})
	}
	return out, p.Next, nil
}
