package evaluation

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"golang.org/x/sync/errgroup"
)

// Retention of evidence (Options.RetainEvidence). A plan's evidence
// expires together, retain after its PLAN_COMPLETE: the execution (whose
// ExpiresAt is set in the commit that stores PLAN_COMPLETE, with that
// event), every earlier event and event id, its VERIFYs (created with the
// execution's ExpiresAt) and the plan's binding guard. An ANTICIPATE
// expires with the last plan it binds that completed; a plan that begins
// under it clears its expiry until that plan completes. Reads treat an
// item past its ExpiresAt as absent (store.Item.ExpiresAt), and every read
// of events, a VERIFY or a bundle goes through the execution or the
// VERIFY, so no read sees part of a plan's evidence. Open plans, and
// ANTICIPATEs no plan has used, never expire.

// evidenceExpiry is when evidence completed now expires ("" never).
func (s *Service) evidenceExpiry() string {
	if s.retain <= 0 {
		return ""
	}
	return expect.FormatTime(expect.ExpiryTime(s.now(), s.retain))
}

// expiring sets an item's ExpiresAt from a record's expires_at ("" none);
// it takes mkItem's results so the item builders stay one expression.
func expiring(it store.Item, err error) func(at string) (store.Item, error) {
	return func(at string) (store.Item, error) {
		if err != nil || at == "" {
			return it, err
		}
		t, perr := expect.ParseTime(at)
		if perr != nil {
			return store.Item{}, fmt.Errorf("%s: expires_at %q: %w", it.Key, at, perr)
		}
		it.ExpiresAt = t.Unix()
		return it, nil
	}
}

// retainEvidence stamps a completed plan's expiry on the items that were
// stored before PLAN_COMPLETE: its earlier events and event ids, and the
// binding guards of its plan id and scope envelope (the ANTICIPATEs it
// bound are given theirs in the PLAN_COMPLETE commit: completeBound). It
// runs after VERIFY on the change that completed the plan, and again
// harmlessly on a replay (an item that carries the expiry already is not
// written).
func (s *Service) retainEvidence(ctx context.Context, agentID, planID string) error {
	ex, err := s.Execution(ctx, agentID, planID)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil || ex.ExpiresAt == "" {
		return err
	}
	at, err := expect.ParseTime(ex.ExpiresAt)
	if err != nil {
		return fmt.Errorf("execution of plan %s: expires_at: %w", planID, err)
	}
	expires := at.Unix()
	var stale []store.Item
	if err := eachOf(ctx, s.store, store.Query{PK: ex.pk}, func(it store.Item) error {
		if it.ExpiresAt != expires {
			stale = append(stale, it)
		}
		return nil
	}); err != nil {
		return err
	}
	// The binding guards of its plan id and scope envelope go with the
	// latest evidence that used them (a later plan of the same scope
	// stamps a later expiry; a declaration made after it expired writes
	// the guard afresh).
	var guards []store.Key
	if ex.pk != legacyExecutionPK(planID) {
		guards = append(guards, bindGuardKey(planBoundPK(planID)))
	}
	if ex.ScopeID != "" {
		guards = append(guards, bindGuardKey(scopeBoundPK(ex.ScopeID)))
	}
	for _, k := range guards {
		if g, err := s.store.Get(ctx, k); err == nil && g.ExpiresAt < expires {
			stale = append(stale, g)
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	var g errgroup.Group
	g.SetLimit(8)
	for _, it := range stale {
		g.Go(func() error {
			v := it.Version
			it.ExpiresAt = expires
			err := s.store.Commit(ctx, []store.Write{store.PutIfVersion(it, v)})
			if errors.Is(err, store.ErrConflict) {
				// Written meanwhile (an execution item by its own
				// commit), or refused for a concurrent transaction,
				// which wrote nothing: stamp what is there now.
				return stampExpiry(ctx, s.store, it.Key, expires)
			}
			return err
		})
	}
	return g.Wait()
}

// stampExpiry gives the item under key the expiry expires, unless it is
// gone or already expires then or later. Errors are the store's.
func stampExpiry(ctx context.Context, st store.Store, key store.Key, expires int64) error {
	return store.Update(ctx, st, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, key)
		if err != nil || !ok || it.ExpiresAt >= expires {
			return err
		}
		it.ExpiresAt = expires
		tx.Put(it)
		return nil
	})
}

// completeBound ends a plan's run on the ANTICIPATEs it bound, in the
// commit of its PLAN_COMPLETE: one fewer running plan each, and once none
// runs, the plan's expiry (unless another plan gave a later one). loaded
// holds those the commit has read already (sealing ones).
func completeBound(ctx context.Context, tx *store.Tx, ex *Execution, loaded []*AnticipationRecord) error {
	for _, id := range ex.Bound {
		var rec *AnticipationRecord
		for _, b := range loaded {
			if b.AnticipateID == id {
				rec = b
			}
		}
		if rec == nil {
			r, ok, err := loadAnticipation(ctx, tx, ex.Owner(), id)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			rec = r
		}
		rec.Running = max(0, rec.Running-1)
		switch {
		case rec.Running > 0:
			rec.ExpiresAt = ""
		case ex.ExpiresAt == "":
		case rec.ExpiresAt < ex.ExpiresAt:
			rec.ExpiresAt = ex.ExpiresAt
		}
		item, err := anticipationItem(rec)
		if err != nil {
			return err
		}
		tx.Put(item)
	}
	return nil
}
