package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// TestEventsPage walks a chain page by page: the pages hold every event
// once, in chain order, each within the count and byte bounds, and a token
// is good only for the plan it was issued for.
func TestEventsPage(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "events.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := New(st, Options{})
	all := func(string) bool { return true }
	caller := Caller{May: all}
	big := strings.Repeat("x", 300<<10)
	for _, plan := range []string{"plan-big", "plan-other"} {
		var m map[string]any
		if err := json.Unmarshal(anticipation50(t, plan), &m); err != nil {
			t.Fatal(err)
		}
		m["anticipation_id"] = "ant-" + plan
		raw, _ := json.Marshal(m)
		ant, err := anticipate.Sign(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.Declare(ctx, ant, "test", all); err != nil {
			t.Fatal(err)
		}
	}
	const n = 7
	for i := 0; i < n; i++ {
		if _, err := svc.AppendEvent(ctx, "plan-big", event(i, "STEP_COMPLETE", map[string]any{"tool_output": big}), caller); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.AppendEvent(ctx, "plan-other", event(0, "STEP_COMPLETE", nil), caller); err != nil {
		t.Fatal(err)
	}

	bigEx, err := svc.ExecutionFor(ctx, "plan-big", "", caller)
	if err != nil {
		t.Fatal(err)
	}
	otherEx, err := svc.ExecutionFor(ctx, "plan-other", "", caller)
	if err != nil {
		t.Fatal(err)
	}
	walk := func(limit int) (seqs []int, sizes []int, firstToken string) {
		t.Helper()
		next := ""
		for {
			evs, tok, err := svc.EventsPage(ctx, bigEx, EventsPageRequest{Limit: limit, NextToken: next})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				t.Fatalf("limit %d: an empty page before the end", limit)
			}
			bytes := 0
			for _, ev := range evs {
				seqs = append(seqs, ev.Seq)
				bytes += len(ev.Event)
			}
			sizes = append(sizes, len(evs))
			if len(evs) > 1 && bytes > EventsPageBytes {
				t.Errorf("limit %d: a page of %d events holds %d bytes of events, over %d", limit, len(evs), bytes, EventsPageBytes)
			}
			if firstToken == "" {
				firstToken = tok
			}
			if tok == "" {
				return seqs, sizes, firstToken
			}
			next = tok
		}
	}
	for _, limit := range []int{0, 1, 2, MaxEventsPage} {
		seqs, sizes, _ := walk(limit)
		if len(seqs) != n {
			t.Fatalf("limit %d: %d events over pages %v, want %d", limit, len(seqs), sizes, n)
		}
		for i, s := range seqs {
			if i > 0 && s != seqs[i-1]+1 {
				t.Fatalf("limit %d: seqs %v are not the chain in order", limit, seqs)
			}
		}
		for _, size := range sizes {
			if limit > 0 && size > limit {
				t.Errorf("limit %d: a page of %d events", limit, size)
			}
		}
		if limit == 0 && (len(sizes) != 3 || sizes[0] != 3) {
			// 300 KiB events: three fit in 1 MiB, a fourth does not.
			t.Errorf("default limit: pages of %v events, want 3, 3, 1 (the byte bound)", sizes)
		}
	}

	_, _, tok := walk(1)
	_, _, err = svc.EventsPage(ctx, otherEx, EventsPageRequest{NextToken: tok})
	var e *errs.Error
	if !errors.As(err, &e) || e.Code != errs.Invalid || len(e.Fields) != 1 || e.Fields[0].Path != "nextToken" {
		t.Errorf("another plan's token: %v, want Invalid naming nextToken", err)
	}
	for _, limit := range []int{-1, MaxEventsPage + 1} {
		_, _, err = svc.EventsPage(ctx, bigEx, EventsPageRequest{Limit: limit})
		if !errors.As(err, &e) || e.Code != errs.Invalid || len(e.Fields) != 1 || e.Fields[0].Path != "limit" {
			t.Errorf("limit %d: %v, want Invalid naming limit", limit, err)
		}
	}
}
