package evaluation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/review"
	"github.com/agentclock/clockwork/internal/store"
)

// ReviewClock keeps review items' due times: the watcher, which raises
// each as an expectation of the reviewed plan's agent (kind review-due)
// and is told when the reviews are in.
type ReviewClock interface {
	RaiseReviewDue(ctx context.Context, agentID, itemID, queueID, planID string, dueAt time.Time) error
	SatisfyReviewDue(ctx context.Context, agentID, itemID string, at time.Time) error
}

// queuedHuman returns, by queue in the criteria's order, the PENDING
// HUMAN criteria of v that name a review queue.
func queuedHuman(a *anticipate.Anticipation, v *anticipate.Verification) (queues []string, by map[string][]anticipate.CategorizedCriterion) {
	by = map[string][]anticipate.CategorizedCriterion{}
	for _, c := range a.Criteria() {
		if c.Measurement != anticipate.Human || c.Queue == "" || !pendingIn(v, c.CriterionID) {
			continue
		}
		if _, ok := by[c.Queue]; !ok {
			queues = append(queues, c.Queue)
		}
		by[c.Queue] = append(by[c.Queue], c)
	}
	return queues, by
}

func pendingIn(v *anticipate.Verification, criterionID string) bool {
	for _, r := range v.Results {
		if r.CriterionID == criterionID {
			return r.Status == anticipate.StatusPending
		}
	}
	return false
}

// stageReviewItems stages, in the commit that creates VERIFY v, one item
// per review queue its PENDING HUMAN criteria name, assigned round-robin
// (the queue's position moves in the same commit), and notes on each
// criterion where its reviews are awaited, or why none are. A queue that
// does not exist, does not serve the agent, or has no reviewer but the
// plan's declarer leaves its criteria to POST
// /v1/verifications/{id}/grades. A final verdict opens no item (no
// review could change it). It returns the items staged.
func (s *Service) stageReviewItems(ctx context.Context, tx *store.Tx, rec *AnticipationRecord, a *anticipate.Anticipation, v *anticipate.Verification, now time.Time) ([]*reviewItemRecord, error) {
	if v.Verdict.Final() {
		return nil, nil
	}
	queues, by := queuedHuman(a, v)
	notes := map[string]string{}
	var out []*reviewItemRecord
	for _, qid := range queues {
		note := func(format string, args ...any) {
			for _, c := range by[qid] {
				notes[c.CriterionID] = fmt.Sprintf(format, args...)
			}
		}
		it, ok, err := tx.Get(ctx, reviewQueueKey(qid))
		if err != nil {
			return nil, err
		}
		var q *review.Queue
		if ok {
			if q, err = decode[review.Queue](it); err != nil {
				return nil, err
			}
		}
		if q == nil || !q.Serves(v.AgentID) {
			note("review queue %s does not exist or does not serve agent %s; grade it with POST /v1/verifications/{id}/grades", qid, v.AgentID)
			continue
		}
		assignees := review.Assign(q, rec.DeclaredBy)
		if len(assignees) == 0 {
			note("review queue %s has no reviewer but %s, who declared the criteria; grade it with POST /v1/verifications/{id}/grades", qid, rec.DeclaredBy)
			continue
		}
		item := &reviewItemRecord{Item: review.Item{
			ItemID: review.ItemID(v.VerificationID, qid, review.Grading, ""), QueueID: qid, Purpose: review.Grading,
			AgentID: v.AgentID, PlanID: v.PlanID, VerificationID: v.VerificationID, Assignees: assignees,
			ReviewsPerItem: q.ReviewsPerItem, Resolve: q.Resolve, Reviews: []review.Review{}, State: review.Open,
			CreatedAt: expect.FormatTime(now), DueAt: expect.FormatTime(q.DueAt(now)),
		}, ExpiresAt: s.itemExpiry(now), UpdatedAt: expect.FormatTime(now)}
		for _, c := range by[qid] {
			item.Criteria = append(item.Criteria, reviewCriterion(c, a.GradingPolicy))
		}
		note("awaiting %d review(s) in queue %s (item %s)", len(assignees), qid, item.ItemID)
		if err := putReviewQueue(tx, q); err != nil {
			return nil, err
		}
		if err := putReviewItem(tx, item); err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	for i := range v.Results {
		if n, ok := notes[v.Results[i].CriterionID]; ok {
			v.Results[i].Evidence = "pending: " + n
		}
	}
	return out, nil
}

// reviewCriterion is c as an item keeps it: its text cut to
// review.MaxCriterionText (the ANTICIPATE keeps it whole).
func reviewCriterion(c anticipate.CategorizedCriterion, p anticipate.GradingPolicy) review.Criterion {
	return review.Criterion{CriterionID: c.CriterionID, Category: string(c.Category), Description: review.Truncate(c.Description, review.MaxCriterionText),
		Assertion: review.Truncate(c.Assertion, review.MaxCriterionText), PassingThreshold: p.PassingThreshold, Anti: c.Category == anticipate.CategoryAnti}
}

func putReviewQueue(tx *store.Tx, q *review.Queue) error {
	item, err := reviewQueueItem(q)
	if err == nil {
		tx.Put(item)
	}
	return err
}

// putReviewItem stages an item: a conditional create when it was not
// read in tx, else a write conditional on the version read.
func putReviewItem(tx *store.Tx, r *reviewItemRecord) error {
	item, err := reviewItemItem(r)
	if err == nil {
		tx.Put(item)
	}
	return err
}

// openCalibration opens, when the judge's grade of a calibrated HEURISTIC
// criterion falls in its sample, an item asking the criterion's queue to
// grade it too; the VERIFY keeps the judge's grade, and the reviews only
// measure agreement (ReviewAgreement). Opening it again does nothing.
func (s *Service) openCalibration(ctx context.Context, rec *AnticipationRecord, a *anticipate.Anticipation, vid, criterionID string) error {
	var c *anticipate.CategorizedCriterion
	for _, cc := range a.Criteria() {
		if cc.CriterionID == criterionID {
			c = &cc
		}
	}
	if c == nil || c.Calibrate == nil || c.Queue == "" || !review.Sampled(vid, criterionID, c.Calibrate.Sample) {
		return nil
	}
	vr, err := s.readVerification(ctx, vid)
	if err != nil || vr == nil {
		return err
	}
	v := vr.Verification
	var judged *anticipate.Result
	for i := range v.Results {
		if r := &v.Results[i]; r.CriterionID == criterionID && (r.Status == anticipate.StatusPass || r.Status == anticipate.StatusFail) && r.Score != nil {
			judged = r
		}
	}
	if judged == nil {
		return nil
	}
	now := s.now()
	var opened *reviewItemRecord
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		opened = nil
		id := review.ItemID(vid, c.Queue, review.Calibration, criterionID)
		if _, ok, err := tx.Get(ctx, reviewItemKey(id)); err != nil || ok {
			return err
		}
		it, ok, err := tx.Get(ctx, reviewQueueKey(c.Queue))
		if err != nil || !ok {
			return err
		}
		q, err := decode[review.Queue](it)
		if err != nil || !q.Serves(v.AgentID) {
			return err
		}
		assignees := review.Assign(q, rec.DeclaredBy)
		if len(assignees) == 0 {
			return nil
		}
		rc := reviewCriterion(*c, a.GradingPolicy)
		rc.Judge = &review.Grade{Score: *judged.Score, Pass: judged.Status == anticipate.StatusPass}
		item := &reviewItemRecord{Item: review.Item{
			ItemID: id, QueueID: c.Queue, Purpose: review.Calibration, AgentID: v.AgentID, PlanID: v.PlanID,
			VerificationID: vid, Criteria: []review.Criterion{rc}, Assignees: assignees, ReviewsPerItem: q.ReviewsPerItem,
			Resolve: q.Resolve, Reviews: []review.Review{}, State: review.Open,
			CreatedAt: expect.FormatTime(now), DueAt: expect.FormatTime(q.DueAt(now)),
		}, ExpiresAt: s.itemExpiry(now), UpdatedAt: expect.FormatTime(now)}
		if err := putReviewQueue(tx, q); err != nil {
			return err
		}
		opened = item
		return putReviewItem(tx, item)
	})
	if err != nil {
		return wrap(err)
	}
	if opened != nil {
		_ = s.keepDue(ctx, opened) // else RepairReviews does it
	}
	return nil
}

// SubmitReview records the reviewer's review (a POSTed body) of one
// criterion of item itemID in queue. The last review the item waits for
// resolves each criterion under the queue's rule and, on a grading item,
// grades the VERIFY with the results in the same commit (graded_by
// "queue:<queueId>"); the item's due time is then satisfied. Errors:
// Invalid naming the failing field; NotFound for an unknown item, one of
// another queue, one the reviewer may not read or is not assigned;
// Conflict for a criterion the reviewer already graded or a done item.
func (s *Service) SubmitReview(ctx context.Context, who Reviewer, queue, itemID string, body []byte) (ReviewItemView, error) {
	in, grade, score, err := review.ParseReview(body)
	if err != nil {
		return ReviewItemView{}, err
	}
	var out *reviewItemRecord
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		now := s.now()
		it, ok, err := tx.Get(ctx, reviewItemKey(itemID))
		if err != nil {
			return err
		}
		notFound := errs.E(errs.NotFound, "no review item %q in queue %q", itemID, queue)
		if !ok {
			return notFound
		}
		r, err := decode[reviewItemRecord](it)
		if err != nil {
			return err
		}
		if r.QueueID != queue || !who.May(r.AgentID) {
			return notFound
		}
		done, err := r.AddReview(who.Principal, in, grade, score, now)
		if err != nil {
			return err
		}
		r.UpdatedAt = expect.FormatTime(now)
		if done && r.Purpose == review.Grading {
			if err := s.gradeReviewed(ctx, tx, r, now); err != nil {
				return err
			}
		}
		out = r
		return putReviewItem(tx, r)
	})
	if err != nil {
		return ReviewItemView{}, wrap(err)
	}
	if out.State == review.Done {
		_ = s.keepDue(ctx, out) // else RepairReviews does it
	}
	return out.view(who.Principal), nil
}

// gradeReviewed stages the grades a done grading item resolved onto its
// VERIFY. A criterion graded meanwhile keeps its grade; a VERIFY erased
// meanwhile takes none.
func (s *Service) gradeReviewed(ctx context.Context, tx *store.Tx, r *reviewItemRecord, now time.Time) error {
	old, ok, err := tx.Get(ctx, verificationKey(r.VerificationID))
	if err != nil || !ok {
		return err
	}
	vr, err := decode[VerificationRecord](old)
	if err != nil {
		return err
	}
	_, a, ok, err := s.gradedAgainst(ctx, tx, vr)
	if err != nil || !ok {
		return err
	}
	v, changed := vr.Verification, false
	for _, c := range r.Criteria {
		res := r.Resolved[c.CriterionID]
		nv, err := anticipate.ApplyCriterionGrade(v, a.GradingPolicy, c.CriterionID,
			anticipate.CriterionGrade{Score: res.Score, Rationale: res.Rationale, GradedBy: "queue:" + r.QueueID}, now)
		switch {
		case errs.Is(err, errs.Conflict):
			continue // graded, or final, meanwhile
		case err != nil:
			return err
		}
		v, changed = nv, true
	}
	if !changed {
		return nil
	}
	if err := s.seal(&v); err != nil {
		return err
	}
	vr.Verification = v
	item, err := verificationItem(r.VerificationID, vr)
	if err != nil {
		return err
	}
	tx.Put(item)
	return s.markVerification(tx, old, item)
}

// keepDue has the watcher raise r's due time, or satisfy it once r is
// done, and records that it did. An agent without an Agent Card has no
// due time kept (noted on the item). Errors: the watcher's or the
// store's; RepairReviews tries again.
func (s *Service) keepDue(ctx context.Context, r *reviewItemRecord) error {
	if !r.needsWatcher() {
		return nil
	}
	if s.reviewClock == nil {
		return errors.New("this process keeps no review due times")
	}
	note, satisfied := r.DueNote, false
	if !r.DueRaised && r.State == review.Done {
		// Reviewed before its due time was raised: raising it now could
		// lapse a review that was in time.
		satisfied = true
	} else if !r.DueRaised {
		due, _ := expect.ParseTime(r.DueAt)
		err := s.reviewClock.RaiseReviewDue(ctx, r.AgentID, r.ItemID, r.QueueID, r.PlanID, due)
		switch {
		case errs.Is(err, errs.NotFound):
			note = fmt.Sprintf("agent %s has no Agent Card, so no due time is kept for this item (the watcher sends lapses to the agent its card names)", r.AgentID)
		case errs.Is(err, errs.Invalid) || errs.Is(err, errs.Conflict):
			// Not a passing failure: trying again would meet it again.
			note = "the watcher refused this item's due time: " + err.Error()
		case err != nil:
			return err
		}
	}
	if r.State == review.Done && note == "" {
		at, _ := expect.ParseTime(r.DoneAt)
		if err := s.reviewClock.SatisfyReviewDue(ctx, r.AgentID, r.ItemID, at); err != nil && !errs.Is(err, errs.NotFound) {
			return err
		}
		satisfied = true
	}
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, reviewItemKey(r.ItemID))
		if err != nil || !ok {
			return err
		}
		cur, err := decode[reviewItemRecord](it)
		if err != nil {
			return err
		}
		cur.DueRaised, cur.DueNote = true, note
		// Without a card there is nothing to satisfy; else satisfied
		// only as of the state read (an item done since is satisfied by
		// the next run).
		cur.DueSatisfied = cur.DueSatisfied || note != "" || satisfied
		*r = *cur
		return putReviewItem(tx, cur)
	})
}

// RepairReviews has the watcher raise or satisfy the due times of the
// items left waiting on it for longer than late (a process that stopped
// between the item's commit and the watcher's), at most limit of them,
// and returns how many it mended.
func (s *Service) RepairReviews(ctx context.Context, late time.Duration, limit int) (int, error) {
	p, err := s.store.Query(ctx, store.Query{Index: store.GSI5, PK: reviewFixPK, SKUpTo: sortTime(s.now().Add(-late)) + "#\uffff", Limit: min(limit, store.MaxLimit)})
	if err != nil {
		return 0, wrap(err)
	}
	n := 0
	var errsOut []error
	for _, it := range p.Items {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < repairReserve {
			break // the next run goes on
		}
		r, err := decode[reviewItemRecord](it)
		if err != nil {
			errsOut = append(errsOut, err)
			continue
		}
		if err := s.keepDue(ctx, r); err != nil {
			errsOut = append(errsOut, fmt.Errorf("review item %s: %w", r.ItemID, err))
			// To the back of the line: an item that keeps failing must not
			// hold the others up.
			_ = s.touchItem(ctx, r.ItemID)
			continue
		}
		n++
	}
	return n, errors.Join(errsOut...)
}

// repairReserve is the time RepairReviews leaves its caller.
const repairReserve = 5 * time.Second

// touchItem moves an item's repair entry to now.
func (s *Service) touchItem(ctx context.Context, itemID string) error {
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, reviewItemKey(itemID))
		if err != nil || !ok {
			return err
		}
		cur, err := decode[reviewItemRecord](it)
		if err != nil {
			return err
		}
		cur.UpdatedAt = expect.FormatTime(s.now())
		return putReviewItem(tx, cur)
	})
}

// reviewedInQueue refuses, in SubmitGrade's commit, a direct grade of a
// HUMAN criterion whose review item exists: its grade is its reviewers'.
func reviewedInQueue(ctx context.Context, tx *store.Tx, a *anticipate.Anticipation, vid, criterionID string) error {
	for _, c := range a.Criteria() {
		if c.CriterionID != criterionID || c.Measurement != anticipate.Human || c.Queue == "" {
			continue
		}
		id := review.ItemID(vid, c.Queue, review.Grading, "")
		if _, ok, err := tx.Get(ctx, reviewItemKey(id)); err != nil || !ok {
			return err
		}
		return errs.E(errs.Conflict, "criterion %s of verification %s is reviewed in review queue %s (item %s): its grade is its reviewers', POST /v1/review-queues/%s/items/%s/reviews",
			criterionID, vid, c.Queue, id, c.Queue, id)
	}
	return nil
}

// eraseReviewItems removes agentID's review items.
func (s *Service) eraseReviewItems(ctx context.Context, agentID string, count func(string, int)) error {
	return eachOf(ctx, s.store, store.Query{Index: store.GSI2, PK: reviewItemsOfPK(agentID)}, func(it store.Item) error {
		n, err := s.deleteItem(ctx, it.Key)
		count(TypeReviewItem, n)
		return err
	})
}
