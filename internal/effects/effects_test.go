package effects

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

func TestOf(t *testing.T) {
	open := `{"state":"open"}`
	lapsed := `{"state":"lapsed","lapse":{"lapse":"overdue"},"delivery":{"messageId":"m"}}`
	recovered := `{"state":"lapsed","lapse":{"lapse":"overdue"},"satisfiedBy":{"factKey":"k"},"delivery":{"messageId":"m"}}`
	dead := `{"state":"lapsed","lapse":{"lapse":"overdue"},"delivery":{"messageId":"m","deadLettered":true}}`
	for _, c := range []struct {
		name, typ, old, new string
		want                []Kind
	}{
		{"raised", "expectation", "", open, nil},
		{"lapsed", "expectation", open, lapsed, []Kind{Alerts}},
		{"lapsed when created (replayed from nothing)", "expectation", "", lapsed, []Kind{Alerts}},
		{"lapse task delivered", "expectation", lapsed, lapsed, nil},
		{"satisfied late", "expectation", lapsed, recovered, []Kind{Alerts}},
		{"dead-lettered", "expectation", lapsed, dead, []Kind{Alerts}},
		{"satisfied on time (re-anchoring is decided apart)", "expectation", open, `{"state":"satisfied","satisfiedBy":{"factKey":"k"}}`, nil},
		{"verdict FAIL", "verification", "", `{"verification":{"verdict":"FAIL"}}`, []Kind{Alerts}},
		{"FAIL again", "verification", `{"verification":{"verdict":"FAIL"}}`, `{"verification":{"verdict":"FAIL"}}`, nil},
		{"verdict PASS (verification.completed)", "verification", "", `{"verification":{"verdict":"PASS"}}`, []Kind{Alerts}},
		{"PASS after PENDING", "verification", `{"verification":{"verdict":"PENDING"}}`, `{"verification":{"verdict":"PASS"}}`, []Kind{Alerts}},
		{"PENDING", "verification", "", `{"verification":{"verdict":"PENDING"}}`, nil},
		{"plan completed", "execution", `{"completed":false}`, `{"completed":true}`, []Kind{Verify}},
		{"event appended", "execution", `{"completed":false}`, `{"completed":false}`, nil},
		{"another type", "subject", "", `{"lapse":{}}`, nil},
		{"deleted", "expectation", lapsed, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var old, new []byte
			if c.old != "" {
				old = []byte(c.old)
			}
			if c.new != "" {
				new = []byte(c.new)
			}
			if got := Of(c.typ, old, new); !slices.Equal(got, c.want) {
				t.Fatalf("Of = %v, want %v", got, c.want)
			}
		})
	}
}

// TestMarkersRepairAndClear: a marker staged with its change is found by
// Pending once past the cutoff, repaired from the item as it is now (a
// change from nothing), and cleared; one whose item is gone is cleared
// without a call; one that fails stays for the next run; Clear removes one
// by the change it names.
func TestMarkersRepairAndClear(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "fx.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Now().UTC().Truncate(time.Second)
	put := func(key store.Key, data string, kinds []Kind) int64 {
		var version int64
		err := store.Update(ctx, st, func(tx *store.Tx) error {
			it, ok, err := tx.Get(ctx, key)
			if err != nil {
				return err
			}
			version = 1
			if ok {
				version = it.Version + 1
			}
			tx.Put(store.Item{Key: key, Type: "execution", Data: []byte(data)})
			return Stage(tx, key, version, t0, kinds)
		})
		if err != nil {
			t.Fatal(err)
		}
		return version
	}
	a := store.Key{PK: "P#a", SK: "EXEC"}
	b := store.Key{PK: "P#b", SK: "EXEC"}
	c := store.Key{PK: "P#c", SK: "EXEC"}
	put(a, `{"completed":true}`, []Kind{Verify})
	vb := put(b, `{"completed":true}`, []Kind{Verify})
	put(c, `{"completed":true}`, []Kind{Verify})
	put(c, `{"completed":true,"more":1}`, nil) // a later change without effects
	if err := st.Commit(ctx, []store.Write{{Delete: &a}}); err != nil {
		t.Fatal(err)
	}
	count := func(cutoff time.Time) int {
		n := 0
		if err := Pending(ctx, st, cutoff, 3, 100, func(store.Key, Marker) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(t0.Add(-time.Second)); n != 0 {
		t.Fatalf("%d markers before the cutoff", n)
	}
	if n := count(t0); n != 3 {
		t.Fatalf("%d markers pending, want 3", n)
	}
	// The stream processed b: its marker is cleared.
	if err := Clear(ctx, st, b, vb); err != nil {
		t.Fatal(err)
	}
	if n := count(t0); n != 2 {
		t.Fatalf("%d markers after clearing b's, want 2", n)
	}
	// Near the caller's deadline it takes none.
	if n, err := Repair(ctx, st, t0, 0, 100, func() bool { return true }, func(context.Context, store.Change) error { return nil }); n != 0 || err != nil || count(t0) != 2 {
		t.Fatalf("repair told to stop: %d, %v, %d left", n, err, count(t0))
	}
	var seen []store.Change
	failing := errors.New("judge down")
	n, err := Repair(ctx, st, t0, 0, 100, nil, func(_ context.Context, ch store.Change) error {
		seen = append(seen, ch)
		return failing
	})
	if n != 1 || !errors.Is(err, failing) || len(seen) != 1 || seen[0].Key != c || seen[0].Old != nil || string(seen[0].New.Data) != `{"completed":true,"more":1}` {
		t.Fatalf("repair with a failing handler: %d repaired, %v, saw %+v", n, err, seen)
	}
	if n := count(t0); n != 1 {
		t.Fatalf("%d markers after a failed repair, want c's left", n)
	}
	n, err = Repair(ctx, st, t0, 0, 100, nil, func(context.Context, store.Change) error { return nil })
	if n != 1 || err != nil || count(t0) != 0 {
		t.Fatalf("second repair: %d, %v, %d left", n, err, count(t0))
	}
}
