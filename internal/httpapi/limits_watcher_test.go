package httpapi_test

// The limits of the watcher's routes.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/httpapi"
	"github.com/agentclock/clockwork/internal/watcher"
)

// watcherLimitCases are the limits of the watcher's routes: bodies and
// nesting, counts, identifiers, texts, lineage, pages, clock sanity.
func watcherLimitCases() []limitCase {
	cfg := expect.DefaultConfig()
	maxN := cfg.MaxPerRequest
	id256, id257 := strings.Repeat("i", expect.MaxIDLen), strings.Repeat("i", expect.MaxIDLen+1)
	text4k, text4k1 := strings.Repeat("t", expect.MaxTextLen), strings.Repeat("t", expect.MaxTextLen+1)
	rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	raiseAt := func(body map[string]any) func(l *limitEnv) limitReq {
		return func(l *limitEnv) limitReq { return limPostJSON(l.agentPath("/expectations"), body) }
	}
	noRecord := func(id string) func(l *limitEnv) { return func(l *limitEnv) { l.wantState(id, "") } }
	isOpen := func(id string) func(l *limitEnv) { return func(l *limitEnv) { l.wantState(id, expect.StateOpen) } }
	raiseSetup := func(body map[string]any) func(l *limitEnv) {
		return func(l *limitEnv) { l.must(200, limPostJSON(l.agentPath("/expectations"), body)) }
	}

	return []limitCase{
		// Bodies and nesting.
		{
			name: "body 1 MiB",
			past: func(l *limitEnv) limitReq {
				return limPost(l.agentPath("/expectations"), limPadTo(mustJSON(limRaise(limExp("body"))), httpapi.DefaultMaxBody+1))
			},
			status: 413, fieldless: true, msg: fmt.Sprint(httpapi.DefaultMaxBody),
			unchanged: noRecord("body"),
			at: func(l *limitEnv) limitReq {
				return limPost(l.agentPath("/expectations"), limPadTo(mustJSON(limRaise(limExp("body"))), httpapi.DefaultMaxBody))
			},
			accepted: isOpen("body"),
		},
		{
			// The envelope's unknown members are ignored, so "pad" nests
			// freely; the top-level object is the first level.
			name: "JSON nesting 32",
			past: func(l *limitEnv) limitReq {
				m := limA2aMessage(map[string]any{"expectations": []any{limExp("nest")}})
				m["pad"] = limNested(32)
				return limPostJSON(l.agentPath("/a2a"), m)
			},
			status: 400, field: "", msg: "nesting deeper than 32",
			unchanged: noRecord("nest"),
			at: func(l *limitEnv) limitReq {
				m := limA2aMessage(map[string]any{"expectations": []any{limExp("nest")}})
				m["pad"] = limNested(31)
				return limPostJSON(l.agentPath("/a2a"), m)
			},
			accepted: isOpen("nest"),
		},

		// Per-request counts.
		{
			name:   "expectations per raise",
			past:   raiseAt(limRaise(limExps("e", maxN+1)...)),
			status: 400, field: "expectations", msg: "more than 50",
			unchanged: func(l *limitEnv) { l.wantState("e-0", ""); l.wantState("e-50", "") },
			at:        raiseAt(limRaise(limExps("e", maxN)...)),
			accepted:  func(l *limitEnv) { l.wantState("e-0", expect.StateOpen); l.wantState("e-49", expect.StateOpen) },
		},
		{
			name: "expectations per a2a request, summed over blocks",
			past: func(l *limitEnv) limitReq {
				arts := []any{}
				for _, part := range [][]map[string]any{limExps("e", 25), limExps("f", 26)} {
					list := []any{}
					for _, e := range part {
						list = append(list, e)
					}
					arts = append(arts, map[string]any{"artifactId": "a", "metadata": a2aMeta(map[string]any{"expectations": list})})
				}
				return limPostJSON(l.agentPath("/a2a"), map[string]any{"task": map[string]any{"id": "task-1", "contextId": "ctx-1", "artifacts": arts}})
			},
			status: 400, field: "expectations", msg: "more than 50",
			unchanged: func(l *limitEnv) { l.wantState("e-0", ""); l.wantState("f-0", "") },
			at: func(l *limitEnv) limitReq {
				list := []any{}
				for _, e := range limExps("e", maxN) {
					list = append(list, e)
				}
				return limPostJSON(l.agentPath("/a2a"), limA2aMessage(map[string]any{"expectations": list}))
			},
			accepted: isOpen("e-49"),
		},
		{
			name:  "facts per report",
			setup: raiseSetup(limRaise(expectationJSON("waits", "limits.fact.0", limFarDue))),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limManyFacts(maxN+1)...))
			},
			status: 400, field: "facts", msg: "more than 50",
			unchanged: isOpen("waits"),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limManyFacts(maxN)...))
			},
			accepted: func(l *limitEnv) { l.wantState("waits", expect.StateSatisfied) },
		},
		{
			// The facts of an A2A payload are checked before its
			// expectations are raised, their count included.
			name: "facts per a2a request",
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/a2a"), limA2aMessage(map[string]any{"expectations": []any{limExp("with-facts")}, "facts": limManyFacts(maxN + 1)}))
			},
			status: 400, field: "facts", msg: "more than 50",
			unchanged: noRecord("with-facts"),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/a2a"), limA2aMessage(map[string]any{"expectations": []any{limExp("with-facts")}, "facts": limManyFacts(maxN)}))
			},
			accepted: isOpen("with-facts"),
		},
		{
			name:  "withdrawals per request",
			setup: raiseSetup(limRaise(limExps("w", maxN)...)),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/withdrawals"), map[string]any{"withdraw": limIds("w", maxN+1)})
			},
			status: 400, field: "withdraw", msg: "more than 50",
			unchanged: func(l *limitEnv) { l.wantState("w-0", expect.StateOpen); l.wantState("w-49", expect.StateOpen) },
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/withdrawals"), map[string]any{"withdraw": limIds("w", maxN)})
			},
			accepted: func(l *limitEnv) {
				l.wantState("w-0", expect.StateWithdrawn)
				l.wantState("w-49", expect.StateWithdrawn)
			},
		},
		{
			name:  "withdrawals per a2a request",
			setup: raiseSetup(limRaise(limExps("w", maxN)...)),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/a2a"), limA2aMessage(map[string]any{"expectations": []any{limExp("with-withdrawals")}, "withdraw": limIds("w", maxN+1)}))
			},
			status: 400, field: "withdraw", msg: "more than 50",
			unchanged: func(l *limitEnv) { l.wantState("with-withdrawals", ""); l.wantState("w-0", expect.StateOpen) },
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/a2a"), map[string]any{"artifactUpdate": map[string]any{"taskId": "task-1", "contextId": "ctx-1",
					"artifact": map[string]any{"artifactId": "a", "metadata": a2aMeta(map[string]any{"expectations": []any{limExp("with-withdrawals")}, "withdraw": limIds("w", maxN)})}}})
			},
			accepted: func(l *limitEnv) {
				l.wantState("with-withdrawals", expect.StateOpen)
				l.wantState("w-49", expect.StateWithdrawn)
			},
		},
		limitAfterCase(maxN),

		// Identifiers: 256 bytes for the watcher's.
		{
			name:   "expectation id",
			past:   raiseAt(limRaise(limExp(id257))),
			status: 400, field: "expectations[0].expectationId", msg: "longer than 256",
			unchanged: noRecord(id257),
			at:        raiseAt(limRaise(limExp(id256))),
			accepted:  isOpen(id256),
		},
		{
			name: "task id",
			past: func(l *limitEnv) limitReq {
				b := limRaise(limExp("task"))
				b["taskId"] = id257
				return limPostJSON(l.agentPath("/expectations"), b)
			},
			status: 400, field: "taskId", msg: "longer than 256",
			unchanged: noRecord("task"),
			at: func(l *limitEnv) limitReq {
				b := limRaise(limExp("task"))
				b["taskId"] = id256
				return limPostJSON(l.agentPath("/expectations"), b)
			},
			accepted: isOpen("task"),
		},
		{
			name:   "subject id",
			past:   raiseAt(limRaise(limWithField(limExp("subject"), "subject", map[string]any{"type": "invoice", "id": id257}))),
			status: 400, field: "expectations[0].subject.id", msg: "longer than 256",
			unchanged: noRecord("subject"),
			at:        raiseAt(limRaise(limWithField(limExp("subject"), "subject", map[string]any{"type": "invoice", "id": id256}))),
			accepted:  isOpen("subject"),
		},
		{
			name:   "agent id",
			past:   func(l *limitEnv) limitReq { return limPutJSON("/v1/agents/"+id257, card()) },
			status: 400, field: "agentId", msg: "longer than 256",
			at: func(l *limitEnv) limitReq { return limPutJSON("/v1/agents/"+id256, card()) },
			accepted: func(l *limitEnv) {
				l.must(200, limGet("/v1/agents/"+id256))
			},
		},
		{
			name:  "withdrawn id",
			setup: raiseSetup(limRaise(limExp(id256))),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/withdrawals"), map[string]any{"withdraw": []any{id256, id257}})
			},
			status: 400, field: "withdraw[1]", msg: "longer than 256",
			unchanged: isOpen(id256),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/withdrawals"), map[string]any{"withdraw": []any{id256}})
			},
			accepted: func(l *limitEnv) { l.wantState(id256, expect.StateWithdrawn) },
		},
		{
			name:  "fact subject id",
			setup: raiseSetup(limRaise(expectationJSON("waits", "limits.subject.fact", limFarDue))),
			past: func(l *limitEnv) limitReq {
				f := limFact("limits.subject.fact", "2026-01-01T00:00:00Z")
				f["subject"] = map[string]any{"type": "invoice", "id": id257}
				return limPostJSON(l.agentPath("/facts"), limFactsBody(f))
			},
			status: 400, field: "facts[0].subject.id", msg: "longer than 256",
			unchanged: isOpen("waits"),
			at: func(l *limitEnv) limitReq {
				f := limFact("limits.subject.fact", "2026-01-01T00:00:00Z")
				f["subject"] = map[string]any{"type": "invoice", "id": id256}
				return limPostJSON(l.agentPath("/facts"), limFactsBody(f))
			},
		},

		// Fact keys and texts: 4 KiB.
		{
			// A fact key is bounded as a text, not as an id; keys this long
			// are stored under a digest.
			name:  "fact key",
			setup: raiseSetup(limRaise(expectationJSON("waits", text4k, limFarDue))),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limFact(text4k1, "2026-01-01T00:00:00Z")))
			},
			status: 400, field: "facts[0].factKey", msg: "longer than 4096",
			unchanged: isOpen("waits"),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limFact(text4k, "2026-01-01T00:00:00Z")))
			},
			accepted: func(l *limitEnv) { l.wantState("waits", expect.StateSatisfied) },
		},
		{
			name:   "satisfiedBy fact key",
			past:   raiseAt(limRaise(expectationJSON("long-key", text4k1, limFarDue))),
			status: 400, field: "expectations[0].satisfiedBy.factKey", msg: "longer than 4096",
			unchanged: noRecord("long-key"),
			at:        raiseAt(limRaise(expectationJSON("long-key", text4k, limFarDue))),
			accepted:  isOpen("long-key"),
		},
		{
			name:   "expects text",
			past:   raiseAt(limRaise(limWithField(limExp("expects"), "expects", text4k1))),
			status: 400, field: "expectations[0].expects", msg: "longer than 4096",
			unchanged: noRecord("expects"),
			at:        raiseAt(limRaise(limWithField(limExp("expects"), "expects", text4k))),
			accepted:  isOpen("expects"),
		},
		{
			name:   "basis text",
			past:   raiseAt(limRaise(limWithField(limExp("basis"), "basis", text4k1))),
			status: 400, field: "expectations[0].basis", msg: "longer than 4096",
			unchanged: noRecord("basis"),
			at:        raiseAt(limRaise(limWithField(limExp("basis"), "basis", text4k))),
			accepted:  isOpen("basis"),
		},
		{
			name:  "withdrawal reason",
			setup: raiseSetup(limRaise(limExp("reason"))),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/withdrawals"), map[string]any{"withdraw": []any{"reason"}, "reason": text4k1})
			},
			status: 400, field: "reason", msg: "longer than 4096",
			unchanged: isOpen("reason"),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/withdrawals"), map[string]any{"withdraw": []any{"reason"}, "reason": text4k})
			},
			accepted: func(l *limitEnv) {
				if r := l.record("reason"); r == nil || r.WithdrawnReason != text4k {
					l.t.Errorf("the 4 KiB reason was not kept")
				}
			},
		},

		// Lineage (supersede chains) and after.
		{
			name: "supersede lineage 16",
			setup: func(l *limitEnv) {
				chain := []map[string]any{limExp("gen-0")}
				for i := 1; i <= 15; i++ {
					chain = append(chain, limWithField(limExp(fmt.Sprintf("gen-%d", i)), "supersedes", fmt.Sprintf("gen-%d", i-1)))
				}
				l.must(200, limPostJSON(l.agentPath("/expectations"), limRaise(chain...)))
			},
			past:   raiseAt(limRaise(limWithField(limExp("gen-16"), "supersedes", "gen-15"), limWithField(limExp("gen-17"), "supersedes", "gen-16"))),
			status: 400, field: "expectations[1].supersedes", msg: "above the bound of 16",
			unchanged: func(l *limitEnv) { l.wantState("gen-15", expect.StateOpen); l.wantState("gen-16", "") },
			at:        raiseAt(limRaise(limWithField(limExp("gen-16"), "supersedes", "gen-15"))),
			accepted: func(l *limitEnv) {
				if r := l.record("gen-16"); r == nil || r.Lineage != 16 {
					l.t.Fatalf("gen-16 = %+v, want lineage 16", r)
				}
				l.wantState("gen-15", expect.StateWithdrawn)
				a := l.must(400, limPostJSON(l.agentPath("/expectations"), limRaise(limWithField(limExp("gen-17"), "supersedes", "gen-16"))))
				wantLimitProblem(l.t, a, 400, "expectations[0].supersedes", "above the bound of 16", false)
				l.wantState("gen-16", expect.StateOpen)
			},
		},

		// Pages.
		{
			name: "page size",
			setup: func(l *limitEnv) {
				for i := 0; i < 11; i++ {
					l.must(200, limPostJSON(l.agentPath("/expectations"), limRaise(limExps(fmt.Sprintf("page%d", i), maxN)...)))
				}
			},
			past: func(l *limitEnv) limitReq {
				return limGet(l.agentPath(fmt.Sprintf("/expectations?limit=%d", watcher.MaxPageSize+1)))
			},
			status: 400, field: "limit", msg: "between 1 and 500",
			at: func(l *limitEnv) limitReq {
				return limGet(l.agentPath(fmt.Sprintf("/expectations?limit=%d", watcher.MaxPageSize)))
			},
			accepted: func(l *limitEnv) {
				a := l.must(200, limGet(l.agentPath(fmt.Sprintf("/expectations?limit=%d", watcher.MaxPageSize))))
				var page struct {
					Records   []json.RawMessage
					NextToken string
				}
				if err := json.Unmarshal(a.body, &page); err != nil {
					l.t.Fatal(err)
				}
				if len(page.Records) != watcher.MaxPageSize || page.NextToken == "" {
					l.t.Errorf("limit=%d: %d records, nextToken %q; want %d and a token (550 exist)", watcher.MaxPageSize, len(page.Records), page.NextToken, watcher.MaxPageSize)
				}
				wantLimitProblem(l.t, l.call(limGet(l.agentPath("/expectations?limit=-1"))), 400, "limit", "between 1 and 500", false)
			},
		},
		{
			name: "events page size",
			setup: func(l *limitEnv) {
				l.declare("ant-pages", "plan-pages", nil)
				for i := 0; i <= evaluation.MaxEventsPage; i++ {
					l.must(202, limPostJSON("/v1/executions/plan-pages/events", limEvent(fmt.Sprintf("ev-%d", i), "STEP_COMPLETE", nil)))
				}
			},
			past: func(l *limitEnv) limitReq {
				return limGet(fmt.Sprintf("/v1/executions/plan-pages/events?limit=%d", evaluation.MaxEventsPage+1))
			},
			status: 400, field: "limit", msg: "between 1 and 100",
			at: func(l *limitEnv) limitReq {
				return limGet(fmt.Sprintf("/v1/executions/plan-pages/events?limit=%d", evaluation.MaxEventsPage))
			},
			accepted: func(l *limitEnv) {
				a := l.must(200, limGet(fmt.Sprintf("/v1/executions/plan-pages/events?limit=%d", evaluation.MaxEventsPage)))
				var page struct {
					Execution struct{ Count int }
					Events    []struct{ Seq int }
					NextToken string
				}
				if err := json.Unmarshal(a.body, &page); err != nil {
					l.t.Fatal(err)
				}
				if len(page.Events) != evaluation.MaxEventsPage || page.NextToken == "" || page.Execution.Count != evaluation.MaxEventsPage+1 {
					l.t.Fatalf("limit=%d: %d events, nextToken %q, count %d; want %d, a token, %d", evaluation.MaxEventsPage, len(page.Events), page.NextToken, page.Execution.Count, evaluation.MaxEventsPage, evaluation.MaxEventsPage+1)
				}
				a = l.must(200, limGet("/v1/executions/plan-pages/events?nextToken="+url.QueryEscape(page.NextToken)))
				var last struct {
					Events    []struct{ Seq int }
					NextToken *string
				}
				if err := json.Unmarshal(a.body, &last); err != nil {
					l.t.Fatal(err)
				}
				if len(last.Events) != 1 || last.Events[0].Seq != page.Events[len(page.Events)-1].Seq+1 || last.NextToken != nil {
					l.t.Errorf("second page: %.300s; want the one last event and no nextToken", a.body)
				}
				if got := len(l.events("plan-pages")); got != evaluation.MaxEventsPage+1 {
					l.t.Errorf("following nextToken: %d events, want %d", got, evaluation.MaxEventsPage+1)
				}
				wantLimitProblem(l.t, l.call(limGet("/v1/executions/plan-pages/events?limit=-1")), 400, "limit", "between 1 and 100", false)
				wantLimitProblem(l.t, l.call(limGet("/v1/executions/plan-pages/events?limit=x")), 400, "limit", "integer", false)
				wantLimitProblem(l.t, l.call(limGet("/v1/executions/plan-pages/events?nextToken=not-a-token")), 400, "nextToken", "not a token", false)
			},
		},

		// Clock sanity.
		{
			name:  "fact observedAt at most an hour ahead",
			setup: raiseSetup(limRaise(expectationJSON("waits", "limits.clock.fact", limFarDue))),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limFact("limits.clock.fact", rfc(time.Now().Add(61*time.Minute)))))
			},
			status: 400, field: "facts[0].observedAt", msg: "ahead of the watcher's clock",
			unchanged: isOpen("waits"),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limFact("limits.clock.fact", rfc(time.Now().Add(59*time.Minute)))))
			},
			accepted: func(l *limitEnv) { l.wantState("waits", expect.StateSatisfied) },
		},
		{
			name:  "fact observedAt not before 1970",
			setup: raiseSetup(limRaise(expectationJSON("waits", "limits.epoch.fact", limFarDue))),
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limFact("limits.epoch.fact", "1969-12-31T23:59:59Z")))
			},
			status: 400, field: "facts[0].observedAt", msg: "before 1970",
			unchanged: isOpen("waits"),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/facts"), limFactsBody(limFact("limits.epoch.fact", "1970-01-01T00:00:00Z")))
			},
		},
		{
			name: "dueAt at most MaxFuture ahead",
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/expectations"), limRaise(expectationJSON("far", "k", rfc(time.Now().Add(cfg.MaxFuture+time.Minute)))))
			},
			status: 400, field: "expectations[0].dueAt", msg: "more than 100 years ahead",
			unchanged: noRecord("far"),
			at: func(l *limitEnv) limitReq {
				due := rfc(time.Now().Add(cfg.MaxFuture))
				l.vars["due"] = due
				return limPostJSON(l.agentPath("/expectations"), limRaise(expectationJSON("far", "k", due)))
			},
			accepted: func(l *limitEnv) {
				if r := l.record("far"); r == nil || r.DueAt != l.vars["due"] {
					l.t.Errorf("far = %+v, want dueAt %s", r, l.vars["due"])
				}
			},
		},
		{
			name: "horizon at most MaxFuture ahead",
			past: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/expectations"), limRaise(limWithField(limExp("horizon"), "horizon", rfc(time.Now().Add(cfg.MaxFuture+time.Minute)))))
			},
			status: 400, field: "expectations[0].horizon", msg: "more than 100 years ahead",
			unchanged: noRecord("horizon"),
			at: func(l *limitEnv) limitReq {
				return limPostJSON(l.agentPath("/expectations"), limRaise(limWithField(limExp("horizon"), "horizon", rfc(time.Now().Add(cfg.MaxFuture)))))
			},
			accepted: isOpen("horizon"),
		},
		{
			// Due at the epoch, the expectation lapses at once; its lapse
			// task goes nowhere in these tests.
			name:   "dueAt not before 1970",
			past:   raiseAt(limRaise(expectationJSON("epoch", "k", "1969-12-31T23:59:59Z"))),
			status: 400, field: "expectations[0].dueAt", msg: "before 1970",
			unchanged: noRecord("epoch"),
			at:        raiseAt(limRaise(expectationJSON("epoch", "k", "1970-01-01T00:00:00Z"))),
			accepted: func(l *limitEnv) {
				if l.record("epoch") == nil {
					l.t.Error("the 1970 expectation was not raised")
				}
			},
		},
	}
}
