package evaluation

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// TestEvidenceExpiresWhateverVerifyDoes: a completed plan's earlier events
// are given its expiry before VERIFY runs, so a VERIFY that keeps failing
// (here its ANTICIPATE no longer decodes) leaves no event behind for good
// (found by a second tenant's probe: the events stayed when VERIFY failed).
func TestEvidenceExpiresWhateverVerifyDoes(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), bolt.Options{NoSync: true, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := New(st, Options{RetainEvidence: time.Hour})
	all := func(string) bool { return true }
	raw := anticipation50(t, "plan-r")
	d, _, err := svc.Declare(ctx, raw, "test", all)
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		AgentID string `json:"agent_id"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	rec, err := svc.readAnticipation(ctx, msg.AgentID, d.AnticipationID)
	if err != nil {
		t.Fatal(err)
	}
	caller := Caller{May: all, Only: rec.AgentID}
	for i, typ := range []string{"STEP_COMPLETE", "STEP_COMPLETE", "PLAN_COMPLETE"} {
		if _, err := svc.AppendEvent(ctx, rec.PlanID, event(i, typ, nil), caller); err != nil {
			t.Fatal(err)
		}
	}
	bad, err := st.Get(ctx, rec.storeKey())
	if err != nil {
		t.Fatal(err)
	}
	bad.Data = []byte(`{"anticipation":`)
	if err := st.Commit(ctx, []store.Write{store.PutIfVersion(bad, bad.Version)}); err != nil {
		t.Fatal(err)
	}
	ex, err := st.Get(ctx, executionKey(executionPK(rec.AgentID, rec.PlanID)))
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.HandleChange(ctx, store.Change{New: &ex}); err == nil {
		t.Fatal("VERIFY over an ANTICIPATE that does not decode succeeded")
	}
	p, err := st.Query(ctx, store.Query{PK: ex.PK})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) < 7 || ex.ExpiresAt == 0 {
		t.Fatalf("%d items in the plan's partition, execution expires %d", len(p.Items), ex.ExpiresAt)
	}
	for _, it := range p.Items {
		if it.ExpiresAt != ex.ExpiresAt {
			t.Errorf("%s (%s) expires at %d, its plan at %d", it.Key, it.Type, it.ExpiresAt, ex.ExpiresAt)
		}
	}
}

// TestBindingGuardsExpireWithTheEvidence: the binding guard of a scope
// envelope (written by declarations bound to the scope rather than a plan)
// is given the expiry of a completed plan that ran in the scope, and a
// later plan of the same scope moves it to its own. Before, a scope's
// guard was kept forever.
func TestBindingGuardsExpireWithTheEvidence(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "g.db"), bolt.Options{NoSync: true, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Second)
	svc := New(st, Options{RetainEvidence: time.Hour, Now: func() time.Time { return now }})
	all := func(string) bool { return true }
	var scope string
	run := func(id, plan string) {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(anticipation50(t, plan), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "plan_id") // bound by its scope envelope
		m["anticipation_id"] = id
		scope, _ = m["scope_envelope_id"].(string)
		agent, _ := m["agent_id"].(string)
		b, _ := json.Marshal(m)
		raw, err := anticipate.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.Declare(ctx, raw, "test", all); err != nil {
			t.Fatal(err)
		}
		caller := Caller{May: all, Only: agent}
		for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
			if _, err := svc.AppendEvent(ctx, plan, event(i, typ, map[string]any{"scope_envelope_id": scope}), caller); err != nil {
				t.Fatal(err)
			}
		}
		ex, err := svc.Execution(ctx, agent, plan)
		if err != nil || len(ex.Bound) == 0 {
			t.Fatalf("plan %s bound %v (%v), want the scope's declaration", plan, ex.Bound, err)
		}
		if err := svc.retainEvidence(ctx, agent, plan); err != nil {
			t.Fatal(err)
		}
	}
	expiry := func() int64 {
		t.Helper()
		g, err := st.Get(ctx, bindGuardKey(scopeBoundPK(scope)))
		if err != nil {
			t.Fatalf("scope guard: %v", err)
		}
		return g.ExpiresAt
	}
	run("ant-scope-1", "plan-g1")
	if got, want := expiry(), now.Add(time.Hour).Unix(); got != want {
		t.Fatalf("scope guard expires at %d, want %d (the plan's)", got, want)
	}
	now = now.Add(10 * time.Minute)
	run("ant-scope-2", "plan-g2")
	if got, want := expiry(), now.Add(time.Hour).Unix(); got != want {
		t.Fatalf("scope guard after a later plan expires at %d, want %d", got, want)
	}
}
