package evaluation

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// conflictingStore refuses, once each, the first commit that writes an
// item of one of the types, as DynamoDB cancels a transaction (or refuses
// a single write) for a concurrent transaction on one of its items: a
// *store.ConflictError that applied nothing, although no condition failed.
type conflictingStore struct {
	store.Store
	types map[string]bool
	mu    sync.Mutex
	hit   map[store.Key]bool
}

func (s *conflictingStore) Commit(ctx context.Context, ws []store.Write) error {
	s.mu.Lock()
	for i, w := range ws {
		if w.Put != nil && s.types[w.Put.Type] && !s.hit[w.Put.Key] {
			s.hit[w.Put.Key] = true
			s.mu.Unlock()
			return &store.ConflictError{Index: i, Key: w.Put.Key}
		}
	}
	s.mu.Unlock()
	return s.Store.Commit(ctx, ws)
}

// TestVerifyOutlivesATransactionConflict: VERIFY's commit refused for a
// concurrent transaction (which wrote nothing) still stores the VERIFY,
// and the plan's events are still given its expiry. Before, VERIFY took
// any conflict for "another run stored it first" and returned success, so
// the stream cleared the effect marker and the plan was never verified (a
// CI run in the AWS mode, whose emulator injects such conflicts, had a
// VERIFY missing); retention took it for "written meanwhile".
func TestVerifyOutlivesATransactionConflict(t *testing.T) {
	ctx := context.Background()
	bst, err := bolt.Open(filepath.Join(t.TempDir(), "c.db"), bolt.Options{NoSync: true, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer bst.Close()
	st := &conflictingStore{Store: bst, types: map[string]bool{}, hit: map[store.Key]bool{}}
	svc := New(st, Options{RetainEvidence: time.Hour, MarkEffects: true})
	all := func(string) bool { return true }
	raw := anticipation50(t, "plan-c")
	d, _, err := svc.Declare(ctx, raw, "test", all)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := svc.readAnticipation(ctx, agentOf(t, raw), d.AnticipationID)
	if err != nil {
		t.Fatal(err)
	}
	caller := Caller{May: all, Only: rec.AgentID}
	for i, typ := range []string{"STEP_COMPLETE", "STEP_COMPLETE", "PLAN_COMPLETE"} {
		if _, err := svc.AppendEvent(ctx, rec.PlanID, event(i, typ, nil), caller); err != nil {
			t.Fatal(err)
		}
	}
	ex, err := st.Get(ctx, executionKey(executionPK(rec.AgentID, rec.PlanID)))
	if err != nil {
		t.Fatal(err)
	}
	// From here every first write of a VERIFY or an event is refused once.
	st.mu.Lock()
	st.types[TypeVerification], st.types[TypeEvent] = true, true
	st.mu.Unlock()
	if err := svc.HandleChange(ctx, store.Change{New: &ex}); err != nil {
		t.Fatalf("VERIFY: %v", err)
	}
	vs, err := svc.Verifications(ctx, d.AnticipationID, rec.AgentID, caller)
	if err != nil || len(vs) != 1 {
		t.Fatalf("after a refused commit: %d verifications (%v), want 1", len(vs), err)
	}
	p, err := st.Query(ctx, store.Query{PK: ex.PK})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Items {
		if it.ExpiresAt != ex.ExpiresAt && !strings.HasPrefix(it.Key.SK, "EXEC") {
			t.Errorf("%s (%s) expires at %d, its plan at %d", it.Key, it.Type, it.ExpiresAt, ex.ExpiresAt)
		}
	}
	if len(st.hit) == 0 {
		t.Fatal("no commit was refused: the test tested nothing")
	}
}

// agentOf is the agent_id of an ANTICIPATE.
func agentOf(t *testing.T, raw []byte) string {
	t.Helper()
	var msg struct {
		AgentID string `json:"agent_id"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		t.Fatal(err)
	}
	return msg.AgentID
}
