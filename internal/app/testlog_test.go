package app

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/awsops"
	"github.com/agentclock/clockwork/internal/effects"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/store"
)

// tailLog keeps the last lines a runtime logged, so that a test that fails
// shows what the runtime did (its errors and warnings) and one that passes
// prints nothing.
type tailLog struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

const tailLogLines = 400

func (l *tailLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if len(l.lines) < tailLogLines {
			l.lines = append(l.lines, line)
			continue
		}
		l.lines[l.next] = line
		l.next = (l.next + 1) % tailLogLines
		l.full = true
	}
	return len(p), nil
}

// String returns the lines kept, oldest first.
func (l *tailLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	if l.full {
		b.WriteString("(earlier lines dropped)\n")
	}
	for i := range l.lines {
		b.WriteString(l.lines[(l.next+i)%len(l.lines)])
		b.WriteByte('\n')
	}
	return b.String()
}

// failureLog returns a logger of the runtime's Info and above that t
// prints when it has failed.
func failureLog(t *testing.T) *slog.Logger {
	l := &tailLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("what the runtime logged (its last %d lines at most):\n%s", tailLogLines, l.String())
		}
	})
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// explainNoVerify logs what may tell why an anticipation has no VERIFY:
// the anticipation as its owner reads it and, in the AWS mode, the effect
// markers still pending (a PLAN_COMPLETE's VERIFY that the stream and the
// sweep have not done).
func (e *testEnv) explainNoVerify(antID string, token ...string) {
	e.t.Helper()
	r := e.call("GET", "/v1/anticipations/"+antID, nil, token...)
	e.t.Logf("anticipation %s: %d %s", antID, r.status, r.body)
	if !e.aws || e.rt == nil || r.status != 200 {
		return
	}
	var got struct {
		Anticipation struct {
			AgentID string `json:"agent_id"`
			PlanID  string `json:"plan_id"`
		} `json:"anticipation"`
		Digest string `json:"digest"`
	}
	_ = json.Unmarshal(r.body, &got)
	ctx := awsops.WithFunction(context.Background(), awsops.Deployment)
	agent, plan := got.Anticipation.AgentID, got.Anticipation.PlanID
	if rec, err := e.rt.Eval.Anticipation(ctx, antID, agent, evaluation.Caller{May: func(string) bool { return true }}); err == nil {
		e.t.Logf("anticipation %s as stored: sealed by %q at %s, running %d", antID, rec.SealedBy, rec.SealedAt, rec.Running)
		plan = cmp.Or(plan, rec.SealedBy)
	}
	if ex, err := e.rt.Eval.Execution(ctx, agent, plan); err != nil {
		e.t.Logf("execution of %s by %s: %v", plan, agent, err)
	} else {
		b, _ := json.Marshal(ex)
		e.t.Logf("execution of %s by %s: %.2000s", plan, agent, b)
	}
	vid := anticipate.VerificationIDFor(got.Digest, plan)
	if v, err := e.rt.Eval.Verification(ctx, vid, func(string) bool { return true }); err != nil {
		e.t.Logf("verification %s (read from the table): %v", vid, err)
	} else {
		b, _ := json.Marshal(v)
		e.t.Logf("verification %s (read from the table): %.2000s", vid, b)
	}
	for i := range effects.Shards {
		p, err := e.rt.Store.Query(ctx, store.Query{PK: fmt.Sprintf("FX#%d", i), Limit: store.MaxLimit})
		if err != nil {
			e.t.Logf("effect markers FX#%d: %v", i, err)
			continue
		}
		for _, it := range p.Items {
			e.t.Logf("pending effect marker %s: %s", it.Key.SK, it.Data)
		}
	}
}
