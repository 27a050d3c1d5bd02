// Package breaker keeps the circuit of each delivery destination (an
// agent's A2A endpoint, an alert channel) in the store, shared by every
// process that delivers, so that a destination that is down gets one probe
// at a time from all of them (retry.Circuit decides; this package loads
// and commits). A closed circuit is no item at all: a healthy destination
// costs one read per attempt and no write.
package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/retry"
	"github.com/agentclock/clockwork/internal/store"
)

// TypeCircuit is the type of a circuit's item.
const TypeCircuit = "circuit"

// Breakers reads and commits circuits.
type Breakers struct {
	st     store.Store
	now    func() time.Time
	policy retry.Policy
	hold   time.Duration

	// stored remembers the circuits this process has stored a failure
	// on, so that a success clears them even when its admission read none
	// (sends admitted at once: without it, the successes between them do
	// not reset the failures in a row, and a destination that fails one
	// send in three would have its circuit opened).
	mu     sync.Mutex
	stored map[store.Key]bool
}

// New returns the circuits of st, on the clock now, whose probes back off
// by policy and hold for hold (the attempt's timeout and the time to
// record it) before another may go.
func New(st store.Store, now func() time.Time, policy retry.Policy, hold time.Duration) *Breakers {
	return &Breakers{st: st, now: now, policy: policy.WithDefaults(), hold: hold, stored: map[store.Key]bool{}}
}

// Admission is what Admit decided, for Succeeded and Failed to record the
// outcome against.
type Admission struct {
	retry.Admission
	// Stored is set when the circuit had an item (failures counted, or
	// open): a success must clear it.
	Stored bool
}

// Admit decides what an attempt at the destination whose circuit is under
// key may do, committing the probe's hold when it is the probe; for Wait
// it returns when to come back (spread by spreadKey, the message's name).
// Errors are the store's.
func (b *Breakers) Admit(ctx context.Context, key store.Key, spreadKey string) (Admission, time.Time, error) {
	var (
		adm   Admission
		until time.Time
	)
	err := store.Update(ctx, b.st, func(tx *store.Tx) error {
		c, ok, err := b.load(ctx, tx, key)
		adm = Admission{Admission: retry.Send, Stored: ok}
		if err != nil || !ok {
			return err
		}
		var next retry.Circuit
		adm.Admission, next, until = c.Admit(b.now(), b.hold, spreadKey)
		if adm.Admission == retry.Probe {
			return b.put(tx, key, next)
		}
		return nil
	})
	return adm, until, err
}

// Succeeded records a send that succeeded after adm: it clears the
// circuit (a probe closes it, a send resets the failures counted); a send
// on a circuit with nothing stored writes nothing. Errors are the store's.
func (b *Breakers) Succeeded(ctx context.Context, key store.Key, adm Admission) error {
	b.mu.Lock()
	known := b.stored[key]
	b.mu.Unlock()
	if adm.Admission != retry.Probe && !adm.Stored && !known {
		return nil
	}
	err := store.Update(ctx, b.st, func(tx *store.Tx) error {
		_, ok, err := b.load(ctx, tx, key)
		if err != nil || !ok {
			return err
		}
		tx.Delete(key)
		return nil
	})
	if err == nil {
		b.remember(key, false)
	}
	return err
}

func (b *Breakers) remember(key store.Key, stored bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if stored {
		b.stored[key] = true
	} else {
		delete(b.stored, key)
	}
}

// Failed records a send after adm that failed with f (retry.Circuit.Failed:
// a failure that says the destination is down opens the circuit, a failed
// probe moves the next probe later, a probe the destination answered
// closes it). dest names the destination in the probes' jitter. Errors are
// the store's.
func (b *Breakers) Failed(ctx context.Context, key store.Key, dest string, adm Admission, f retry.Failure) error {
	if adm.Admission == retry.Send && !f.DownsDestination() {
		return nil
	}
	stored := false
	err := store.Update(ctx, b.st, func(tx *store.Tx) error {
		c, ok, err := b.load(ctx, tx, key)
		if err != nil {
			return err
		}
		next := c.Failed(dest, adm.Admission == retry.Probe, b.now(), b.policy, f)
		stored = !next.Zero()
		switch {
		case next == c:
			return nil
		case next.Zero():
			if ok {
				tx.Delete(key)
			}
			return nil
		}
		return b.put(tx, key, next)
	})
	if err == nil {
		b.remember(key, stored)
	}
	return err
}

// State returns the circuit under key (closed when there is none). Errors
// are the store's.
func (b *Breakers) State(ctx context.Context, key store.Key) (retry.Circuit, error) {
	it, err := b.st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return retry.Circuit{}, nil
	}
	if err != nil {
		return retry.Circuit{}, err
	}
	var c retry.Circuit
	return c, json.Unmarshal(it.Data, &c)
}

func (b *Breakers) load(ctx context.Context, tx *store.Tx, key store.Key) (retry.Circuit, bool, error) {
	it, ok, err := tx.Get(ctx, key)
	if err != nil || !ok {
		return retry.Circuit{}, false, err
	}
	var c retry.Circuit
	if err := json.Unmarshal(it.Data, &c); err != nil {
		// A circuit that cannot be read is as good as closed: the next
		// failure writes a fresh one over it.
		return retry.Circuit{}, true, nil
	}
	return c, true, nil
}

// put stages c under key, expiring a day past the retry window after its
// next probe: a circuit no attempt comes back to (every message given up
// or erased) goes away by itself.
func (b *Breakers) put(tx *store.Tx, key store.Key, c retry.Circuit) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	at := b.now()
	for _, t := range []time.Time{c.NextProbeAt, c.ProbeUntil} {
		if t.After(at) {
			at = t
		}
	}
	tx.Put(store.Item{Key: key, Type: TypeCircuit, Data: data, ExpiresAt: at.Add(b.policy.For + 24*time.Hour).Unix()})
	return nil
}
