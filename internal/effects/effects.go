// Package effects keeps the pending markers of the asynchronous effects a
// change must cause, so that none is lost when the change's record in the
// feed is (on AWS, Lambda discards a stream record after its retries or
// its maximum age). A commit that makes such a change writes a marker item
// in the same transaction; whoever processes the change (the change feed,
// the stream function) clears the marker once the effects are done; and
// the sweep redoes, from the item as it is now, the effects of every marker
// older than a margin, whatever happened to the record in the feed.
//
// The effects (Kind) and the changes that call for them:
//
//   - Alerts: an expectation that lapsed, was satisfied after it lapsed,
//     whose lapse was acknowledged or whose lapse task was dead-lettered; a VERIFY whose verdict became
//     FAIL (the alert notifications of the occurrence).
//   - Reanchor: an expectation satisfied while others are anchored on it
//     (their due times move).
//   - Verify: an execution whose PLAN_COMPLETE was stored (VERIFY, its
//     grading jobs, and the evidence's expiry).
//
// Every effect is idempotent and decided from the item as it is, so the
// sweep redoes one by handling a change from nothing to the current item.
package effects

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

// Kind names an effect.
type Kind string

// The effects.
const (
	Alerts   Kind = "alerts"
	Reanchor Kind = "reanchor"
	Verify   Kind = "verify"
)

// TypeMarker is the type of a marker item.
const TypeMarker = "effectmarker"

// Shards spreads the markers over partitions (FX#0 to FX#7).
const Shards = 8

// markerTTL is how long a marker is kept if nothing clears it (the sweep
// clears every one it handles long before).
const markerTTL = 7 * 24 * time.Hour

// Marker is the record of a change whose effects may be pending.
type Marker struct {
	// Item is the key of the changed item; Version the version the change
	// wrote.
	Item    store.Key `json:"item"`
	Version int64     `json:"version"`
	// At is when the change was committed.
	At time.Time `json:"at"`
	// Effects are the effects the change calls for.
	Effects []Kind `json:"effects"`
}

// MarkerKey is the key of the marker of the change that wrote version of
// the item under item: one per change, so that clearing one never clears
// a later change's.
func MarkerKey(item store.Key, version int64) store.Key {
	h := fnv.New32a()
	h.Write([]byte(item.PK + "\x00" + item.SK))
	return store.Key{PK: fmt.Sprintf("FX#%d", h.Sum32()%Shards), SK: fmt.Sprintf("%s|%s|%020d", store.KeyPart(item.PK), store.KeyPart(item.SK), version)}
}

// Stage puts the marker of a change into tx: the change writes version of
// the item under item at at, and calls for kinds (nothing is staged for
// none). Errors are encoding errors.
func Stage(tx *store.Tx, item store.Key, version int64, at time.Time, kinds []Kind) error {
	w, ok, err := Write(item, version, at, kinds)
	if err != nil || !ok {
		return err
	}
	tx.PutUnconditional(*w.Put)
	return nil
}

// Write returns the write of the marker of a change (as Stage stages it)
// for a commit made without a store.Tx, and false when the change calls
// for no effect. Errors are encoding errors.
func Write(item store.Key, version int64, at time.Time, kinds []Kind) (store.Write, bool, error) {
	if len(kinds) == 0 {
		return store.Write{}, false, nil
	}
	data, err := json.Marshal(Marker{Item: item, Version: version, At: at.UTC(), Effects: kinds})
	if err != nil {
		return store.Write{}, false, err
	}
	return store.Write{Put: &store.Item{Key: MarkerKey(item, version), Type: TypeMarker, Data: data, ExpiresAt: at.Add(markerTTL).Unix()}}, true, nil
}

// Clear deletes the marker of the change that wrote version of the item
// under item (a blind delete: clearing one that is not there, or twice,
// is harmless). Errors are the store's.
func Clear(ctx context.Context, st store.Store, item store.Key, version int64) error {
	key := MarkerKey(item, version)
	return st.Commit(ctx, []store.Write{{Delete: &key}})
}

// Pending calls fn with each marker committed at or before cutoff, at most
// limit, shard by shard from start (which the caller turns, so that a run
// cut short does not always leave the same shards). A marker that does not
// decode is passed with only its Item unset, for the caller to clear.
// Errors are the store's or fn's.
func Pending(ctx context.Context, st store.Store, cutoff time.Time, start, limit int, fn func(key store.Key, m Marker) error) error {
	n := 0
	for i := range Shards {
		q := store.Query{PK: fmt.Sprintf("FX#%d", (start+i)%Shards), Limit: store.MaxLimit}
		for {
			p, err := st.Query(ctx, q)
			if err != nil {
				return err
			}
			for _, it := range p.Items {
				var m Marker
				if err := json.Unmarshal(it.Data, &m); err == nil && m.At.After(cutoff) {
					continue
				}
				if err := fn(it.Key, m); err != nil {
					return err
				}
				if n++; n >= limit {
					return nil
				}
			}
			if p.Next == "" {
				break
			}
			q.After = p.Next
		}
	}
	return nil
}

// Handler handles a change, as the change feed does.
type Handler func(ctx context.Context, ch store.Change) error

// Repair redoes the effects of the markers committed at or before cutoff
// (at most limit): each is handled by handle as a change from nothing to
// its item as it is now (nothing, when the item is gone), then cleared. It
// stops taking markers once stop reports true (the caller's deadline is
// near; nil: never). It returns how many it repaired; a marker whose
// handling fails is left for the next run, and the error of the first
// such is returned with the rest still tried.
func Repair(ctx context.Context, st store.Store, cutoff time.Time, start, limit int, stop func() bool, handle Handler) (int, error) {
	type pending struct {
		key store.Key
		m   Marker
	}
	var todo []pending
	err := Pending(ctx, st, cutoff, start, limit, func(key store.Key, m Marker) error {
		todo = append(todo, pending{key, m})
		return nil
	})
	if err != nil {
		return 0, err
	}
	done := 0
	var first error
	for _, p := range todo {
		if ctx.Err() != nil {
			return done, ctx.Err()
		}
		if stop != nil && stop() {
			return done, first
		}
		if p.m.Item != (store.Key{}) {
			if err := Redo(ctx, st, p.m.Item, handle); err != nil {
				first = cmp.Or(first, fmt.Errorf("effects of %s: %w", p.m.Item, err))
				continue
			}
		}
		key := p.key
		if err := st.Commit(ctx, []store.Write{{Delete: &key}}); err != nil {
			first = cmp.Or(first, err)
			continue
		}
		done++
	}
	return done, first
}

// Redo handles, with handle, a change from nothing to the item under key
// as it is now, which every effect of the item's changes handles
// idempotently; an item that is gone needs nothing. Errors are the
// store's and handle's.
func Redo(ctx context.Context, st store.Store, key store.Key, handle Handler) error {
	it, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return handle(ctx, store.Change{Key: key, New: &it})
}

// Of returns the effects (other than Reanchor, which depends on what else
// is stored) that a change of an item of type typ from old to new data
// calls for (old nil: the item is new). It is what the commit that makes
// the change stages a marker for, and what the feed clears once it has
// processed the change.
func Of(typ string, old, new []byte) []Kind {
	if new == nil {
		return nil
	}
	switch typ {
	case "expectation":
		if !bytes.Contains(new, []byte(`"lapse":`)) {
			return nil // every alert of an expectation needs a lapse
		}
		var o, n expectationView
		if old != nil {
			_ = json.Unmarshal(old, &o)
		}
		if json.Unmarshal(new, &n) != nil {
			return nil
		}
		lapsed := n.Lapse != nil && o.Lapse == nil
		recovered := n.Lapse != nil && n.SatisfiedBy != nil && o.SatisfiedBy == nil
		dead := n.dead() && !o.dead()
		acked := n.Lapse != nil && n.Ack != nil && o.Ack == nil
		if lapsed || recovered || dead || acked {
			return []Kind{Alerts}
		}
	case "verification":
		var o, n verificationView
		if old != nil {
			_ = json.Unmarshal(old, &o)
		}
		// A verdict that became final (verification.completed, and
		// verification.failed when it is FAIL).
		final := func(v string) bool { return v == "PASS" || v == "FAIL" }
		if json.Unmarshal(new, &n) == nil && final(n.Verification.Verdict) && !final(o.Verification.Verdict) {
			return []Kind{Alerts}
		}
	case "execution":
		var o, n executionView
		if old != nil {
			_ = json.Unmarshal(old, &o)
		}
		if json.Unmarshal(new, &n) == nil && n.Completed && !o.Completed {
			return []Kind{Verify}
		}
	}
	return nil
}

// With returns kinds with k added (once).
func With(kinds []Kind, k Kind) []Kind {
	if slices.Contains(kinds, k) {
		return kinds
	}
	return append(kinds, k)
}

type expectationView struct {
	Lapse       *struct{} `json:"lapse"`
	Ack         *struct{} `json:"ack"`
	SatisfiedBy *struct{} `json:"satisfiedBy"`
	Delivery    *struct {
		DeadLettered bool `json:"deadLettered"`
	} `json:"delivery"`
}

func (v expectationView) dead() bool { return v.Delivery != nil && v.Delivery.DeadLettered }

type verificationView struct {
	Verification struct {
		Verdict string `json:"verdict"`
	} `json:"verification"`
}

type executionView struct {
	Completed bool `json:"completed"`
}
