package awsrt

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// newRuntime starts a runtime on the emulator with a fresh table and
// schedule group, counting every AWS call.
func newRuntime(t *testing.T, counter *dynamo.Counter, more ...func(*middleware.Stack) error) *Runtime {
	t.Helper()
	return newRuntimeWith(t, nil, counter, more...)
}

// newRuntimeWith is newRuntime with the watcher's clock now (nil: the
// wall clock).
func newRuntimeWith(t *testing.T, now func() time.Time, counter *dynamo.Counter, more ...func(*middleware.Stack) error) *Runtime {
	t.Helper()
	return newRuntimeWithTokens(t, now, `{"tokens":[{"token":"t","principal":"p","scopes":["agents:write","expectations:write","facts:write","read"],"agents":["*"]}]}`, counter, more...)
}

// newRuntimeWithTokens is newRuntimeWith with the tokens file tokensJSON.
func newRuntimeWithTokens(t *testing.T, now func() time.Time, tokensJSON string, counter *dynamo.Counter, more ...func(*middleware.Stack) error) *Runtime {
	t.Helper()
	endpoint := dynamotest.Start(t)
	var b [4]byte
	rand.Read(b[:])
	name := fmt.Sprintf("budget-%x", b)
	rt, err := New(context.Background(), Config{
		Now:   now,
		Table: name, ScheduleGroup: name,
		ClockFunctionARN: "arn:aws:lambda:us-east-1:000000000000:function:clock",
		SchedulerRoleARN: "arn:aws:iam::000000000000:role/scheduler",
		TokensJSON:       tokensJSON,
		Endpoint:         endpoint, AllowPrivateAgents: true,
		APIOptions: append([]func(*middleware.Stack) error{dynamo.CountingMiddleware(counter)}, more...),
		Log:        slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamo.CreateTable(context.Background(), rt.DynamoDB, name); err != nil {
		t.Fatal(err)
	}
	if err := rt.Clock.CreateGroup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

func call(t *testing.T, h http.Handler, method, path string, body any) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	if raw, ok := body.([]byte); ok {
		b = raw
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.Bytes())
	}
	return w.Body.Bytes()
}

var writeOps = []string{"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}

func writes(c *dynamo.Counter) int {
	n := 0
	for _, op := range writeOps {
		n += c.Count(op)
	}
	return n
}

// itemCounter counts the items the write calls write: one per PutItem,
// UpdateItem or DeleteItem, one per action of a TransactWriteItems.
type itemCounter struct{ n atomic.Int64 }

func (c *itemCounter) middleware(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("countItems", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		switch p := in.Parameters.(type) {
		case *dynamodb.TransactWriteItemsInput:
			c.n.Add(int64(len(p.TransactItems)))
		case *dynamodb.PutItemInput, *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput:
			c.n.Add(1)
		}
		return next.HandleInitialize(ctx, in)
	}), middleware.Before)
}

func exp(id, due string, extra ...func(map[string]any)) map[string]any {
	m := map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": "42"},
		"expects": "paid", "satisfiedBy": map[string]any{"factKey": "paid." + id}, "dueAt": due, "basis": "contract"}
	for _, f := range extra {
		f(m)
	}
	return m
}

// TestDynamoDBCallBudgets pins the DynamoDB calls of the request paths.
// Lookup entries are written apart from the item's commit (store.EntriesApart:
// a transaction would cost each of them twice): raising one expectation is
// one conditional PutItem of the record after one write of each of its two
// lookup entries (fact key, task), no transaction; a fact is one consistent
// query of its lookup entries, one GetItem per expectation found, one
// query (of one item) for whether any expectation is anchored on one it
// satisfies (then the commit carries the marker that makes the sweep redo
// the re-anchoring if the stream loses the change: package effects), one
// transaction carrying each expectation it changes and the subject, then the
// delete of each entry it made stale (a GetItem and a conditional
// DeleteItem); a lapse is one transaction of the record and its effect
// marker (its alerts must not depend on the stream alone) and the delete
// of its task entry; and nothing ever scans.
func TestDynamoDBCallBudgets(t *testing.T) {
	counter := &dynamo.Counter{}
	items := &itemCounter{}
	rt := newRuntime(t, counter, items.middleware)
	h := rt.HTTP()
	agent := a2atest.NewAgent(t, "1.0")
	call(t, h, "PUT", "/v1/agents/a1", agent.Card())
	due := expect.FormatTime(time.Now().Add(time.Hour))

	counter.Reset()
	items.n.Store(0)
	call(t, h, "POST", "/v1/agents/a1/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": []any{exp("e1", due)}})
	if w, p, u := writes(counter), counter.Count("PutItem"), counter.Count("UpdateItem"); w != 3 || p != 1 || u != 2 {
		t.Fatalf("raise: %d writes (%v), want one PutItem and two entry writes (UpdateItem)", w, counter.Snapshot())
	}
	t.Logf("raise: %v, %d items written (the record and its lookup entries)", counter.Snapshot(), items.n.Load())

	counter.Reset()
	call(t, h, "POST", "/v1/agents/a1/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": []any{exp("e2", due, func(m map[string]any) { m["supersedes"] = "e1" })}})
	if w, tx, u, d := writes(counter), counter.Count("TransactWriteItems"), counter.Count("UpdateItem"), counter.Count("DeleteItem"); w != 5 || tx != 1 || u != 2 || d != 2 {
		t.Fatalf("supersede: %v, want one TransactWriteItems (both records), two entry writes and two entry deletes", counter.Snapshot())
	}
	t.Logf("raise superseding: %v", counter.Snapshot())

	counter.Reset()
	items.n.Store(0)
	call(t, h, "POST", "/v1/agents/a1/facts", map[string]any{"facts": []any{map[string]any{"factKey": "paid.e2", "observedAt": expect.FormatTime(time.Now())}}})
	if q, g, w, tx, d := counter.Count("Query"), counter.Count("GetItem"), writes(counter), counter.Count("TransactWriteItems"), counter.Count("DeleteItem"); q != 2 || w != 4 || tx != 1 || d != 2 || g != 5 {
		t.Fatalf("fact: %v, want two queries (its lookup entries, satisfying and refuting in one partition; whether it has dependents), five GetItems (card, expectation, subject, two stale entries), one put of the fact's memory (for lookback, beside the transaction), one TransactWriteItems and two entry deletes", counter.Snapshot())
	}
	t.Logf("fact: %v, %d items written (the fact's memory, the record, the subject, the deletes of its lookup entries)", counter.Snapshot(), items.n.Load())

	// A lapse: the clock's tick at the grace end (here due, no grace).
	soon := time.Now().Add(time.Second)
	call(t, h, "POST", "/v1/agents/a1/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": []any{exp("e3", expect.FormatTime(soon))}})
	rec, err := rt.Watcher.Get(context.Background(), "a1", "e3")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(soon.Add(50 * time.Millisecond)))
	counter.Reset()
	items.n.Store(0)
	for _, in := range expect.Instants(rec) {
		if err := rt.Watcher.Tick(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if r, _ := rt.Watcher.Get(context.Background(), "a1", "e3"); r.State != expect.StateLapsed {
		t.Fatalf("e3 did not lapse: %s", r.State)
	}
	if w, tx, d := writes(counter), counter.Count("TransactWriteItems"), counter.Count("DeleteItem"); w != 2 || tx != 1 || d != 1 {
		t.Fatalf("lapse: %v, want one TransactWriteItems (the record and its effect marker) and the delete of its task entry", counter.Snapshot())
	}
	t.Logf("lapse: %v, %d items written (the record, its effect marker, the delete of its task entry)", counter.Snapshot(), items.n.Load())

	counter.Reset()
	call(t, h, "POST", "/v1/agents/a1/facts", map[string]any{"facts": []any{map[string]any{"factKey": "paid.nothing", "observedAt": expect.FormatTime(time.Now())}}})
	// Its memory is written (an expectation raised later with a lookback
	// may recall it), and nothing else.
	if q, w, tx := counter.Count("Query"), writes(counter), counter.Count("TransactWriteItems"); q != 1 || w != 1 || tx != 0 {
		t.Fatalf("fact matching nothing: %v, want one query and one write (its memory)", counter.Snapshot())
	}
	if counter.Count("Scan") != 0 {
		t.Fatal("a request path scanned")
	}
}

// streamDrainer returns a function that runs the stream function on every
// change of rt's table so far, and on the changes it makes, until the
// stream is quiet (at most rounds reads of 100).
func streamDrainer(t *testing.T, rt *Runtime, rounds int) func() {
	t.Helper()
	ctx := context.Background()
	arn, err := dynamo.StreamARN(ctx, rt.DynamoDB, rt.Config.Table)
	if err != nil {
		t.Fatal(err)
	}
	reader := dynamo.NewStreamReader(rt.Streams, arn, dynamo.StreamOptions{})
	return func() {
		t.Helper()
		for range rounds {
			chs, err := reader.ReadFeed(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(chs) == 0 {
				return
			}
			for _, ch := range chs {
				if err := rt.HandleChange(ctx, ch); err != nil {
					t.Fatal(err)
				}
			}
			if err := reader.AckFeed(ctx, chs[len(chs)-1].Seq); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatal("the stream did not quiet down")
	}
}
