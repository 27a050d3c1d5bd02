package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/review"
	"github.com/agentclock/clockwork/internal/store"
)

// Review queues: configured per queue id (owned, like alert channels, by
// the agents of the token that created it), and the items VERIFY opens in
// them (review_items.go).

// Item types of review queues.
const (
	TypeReviewQueue = "review_queue"
	TypeReviewItem  = "review_item"
)

// Limits on review queues.
const (
	MaxReviewQueues         = 500
	MaxReviewQueuesPerOwner = 100
	MaxReviewItemsPage      = 100
	// maxAgreementItems bounds the done items one agreement reads (each
	// is read whole, within one API invocation's time).
	maxAgreementItems = 2000
	// reviewItemsPageBytes bounds a page of items past its first (an AWS
	// Lambda answer is at most 6 MB).
	reviewItemsPageBytes = 1 << 20
)

const reviewQueuesPK = "RQUEUES"

func reviewQueueKey(id string) store.Key { return store.Key{PK: "RQ#" + esc(id), SK: "QUEUE"} }
func reviewItemKey(id string) store.Key  { return store.Key{PK: "RVI#" + esc(id), SK: "ITEM"} }
func reviewItemsPK(queue, state string) string {
	return "RVQ#" + esc(queue) + "#" + state
}
func reviewItemsOfPK(agent string) string { return "RVA#" + esc(agent) }

// reviewFixPK is the GSI5 partition of the items whose due time the
// watcher has yet to raise or satisfy (RepairReviews).
const reviewFixPK = "RVFIX"

func reviewQueueItem(q *review.Queue) (store.Item, error) {
	return mkItem(reviewQueueKey(q.QueueID), TypeReviewQueue, q, map[store.IndexName]store.IndexKey{
		store.GSI5: {PK: reviewQueuesPK, SK: esc(q.QueueID)}})
}

// PutReviewQueue creates or replaces queue id for a token acting for
// agents (who become its owners) and reports whether it was created. A
// replaced queue keeps its owners and its round-robin position; its items
// keep the reviewers and rule they were made with. Errors: Invalid naming
// each failing field; NotFound for a queue the token may not see;
// Conflict for another token's agents' queue, or past the limits.
func (s *Service) PutReviewQueue(ctx context.Context, agents []string, id string, body []byte) (review.Queue, bool, error) {
	q, err := review.ParseQueue(id, body)
	if err != nil {
		return review.Queue{}, false, err
	}
	now := expect.FormatTime(s.now())
	created := false
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, reviewQueueKey(id))
		if err != nil {
			return err
		}
		next := q
		next.Owners, next.CreatedAt, next.UpdatedAt = slices.Clone(agents), now, now
		created = !ok
		if ok {
			cur, err := decode[review.Queue](it)
			if err != nil {
				return err
			}
			if !cur.VisibleTo(agents) {
				return errs.E(errs.NotFound, "no review queue %q that this token may change", id)
			}
			if !cur.ReplaceableBy(agents) {
				return errs.E(errs.Conflict, "review queue %q belongs to agents %v, not to this token's agents: choose another id", id, cur.Owners)
			}
			next.Owners, next.CreatedAt, next.Next = cur.Owners, cur.CreatedAt, cur.Next
		} else if err := s.checkQueueRoom(ctx, agents); err != nil {
			return err
		}
		item, err := reviewQueueItem(&next)
		if err != nil {
			return err
		}
		tx.Put(item)
		q = next
		return nil
	})
	if err != nil {
		return review.Queue{}, false, wrap(err)
	}
	q.Next = 0
	return q, created, nil
}

// checkQueueRoom refuses a new queue past the limits.
func (s *Service) checkQueueRoom(ctx context.Context, agents []string) error {
	all, err := s.ReviewQueues(ctx, []string{"*"})
	if err != nil {
		return err
	}
	if len(all) >= MaxReviewQueues {
		return errs.E(errs.Conflict, "this server holds %d review queues, the most it keeps; delete some first", MaxReviewQueues)
	}
	mine := 0
	for i := range all {
		if review.SameAgents(all[i].Owners, agents) {
			mine++
		}
	}
	if mine >= MaxReviewQueuesPerOwner {
		return errs.E(errs.Conflict, "this token's agents own %d review queues, the most they may; delete some first", MaxReviewQueuesPerOwner)
	}
	return nil
}

// reviewQueue reads queue id. Errors: NotFound.
func (s *Service) reviewQueue(ctx context.Context, id string) (*review.Queue, error) {
	it, err := s.store.Get(ctx, reviewQueueKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.E(errs.NotFound, "no review queue %q", id)
	}
	if err != nil {
		return nil, wrap(err)
	}
	return decode[review.Queue](it)
}

// ReviewQueue returns queue id as a token acting for agents sees it.
// Errors: NotFound, also for a queue serving none of its agents.
func (s *Service) ReviewQueue(ctx context.Context, agents []string, id string) (review.Queue, error) {
	q, err := s.reviewQueue(ctx, id)
	if err != nil {
		return review.Queue{}, err
	}
	if !q.VisibleTo(agents) {
		return review.Queue{}, errs.E(errs.NotFound, "no review queue %q", id)
	}
	q.Next = 0
	return *q, nil
}

// ReviewQueues lists the queues a token acting for agents sees, by id.
// Errors are the store's.
func (s *Service) ReviewQueues(ctx context.Context, agents []string) ([]review.Queue, error) {
	out := []review.Queue{}
	err := eachOf(ctx, s.store, store.Query{Index: store.GSI5, PK: reviewQueuesPK}, func(it store.Item) error {
		q, err := decode[review.Queue](it)
		if err != nil {
			return err
		}
		if q.VisibleTo(agents) {
			q.Next = 0
			out = append(out, *q)
		}
		return nil
	})
	return out, wrap(err)
}

// DeleteReviewQueue deletes queue id. Its items stay (their reviewers may
// still review them); plans completing later find no queue and leave
// their HUMAN criteria to POST /v1/verifications/{id}/grades. Errors:
// NotFound; Conflict for another token's agents' queue.
func (s *Service) DeleteReviewQueue(ctx context.Context, agents []string, id string) error {
	q, err := s.reviewQueue(ctx, id)
	if err != nil {
		return err
	}
	if !q.VisibleTo(agents) {
		return errs.E(errs.NotFound, "no review queue %q", id)
	}
	if !q.ReplaceableBy(agents) {
		return errs.E(errs.Conflict, "review queue %q belongs to agents %v, not to this token's agents", id, q.Owners)
	}
	_, err = store.Remove(ctx, s.store, reviewQueueKey(id))
	return wrap(err)
}

// Reviewer is who asks for review items: the token's principal and what
// it may read.
type Reviewer struct {
	Principal string
	Agents    []string
	May       Authorizer
}

// ReviewItemsPage is a page of a queue's items.
type ReviewItemsPage struct {
	Items     []ReviewItemView `json:"items"`
	NextToken string           `json:"nextToken,omitempty"`
}

// ReviewItems lists queue's items in state (open or done, default open),
// oldest first, that the reviewer may read (their plans' agents), as the
// reviewer sees them; with assignee set, only those assigned to that
// principal. The queue itself need not exist (a deleted queue's items stay
// listed), and another tenant's queue lists as an unknown one does: no
// item the reviewer may read. A page holds at most limit items and reads
// at most a few store pages: NextToken continues. Errors: Invalid naming
// queueId, state or nextToken.
func (s *Service) ReviewItems(ctx context.Context, who Reviewer, queue, state, assignee string, limit int, nextToken string) (ReviewItemsPage, error) {
	if msg := review.ValidQueueID(queue); msg != "" {
		return ReviewItemsPage{}, errs.Fields("invalid query", []errs.FieldError{{Path: "queueId", Message: msg}})
	}
	switch state {
	case "":
		state = review.Open
	case review.Open, review.Done:
	default:
		return ReviewItemsPage{}, errs.Fields("invalid query", []errs.FieldError{{Path: "state", Message: "must be open or done"}})
	}
	if limit <= 0 || limit > MaxReviewItemsPage {
		limit = MaxReviewItemsPage
	}
	out := ReviewItemsPage{Items: []ReviewItemView{}}
	// Each store page asks for what is left to fill, so a page ends where
	// the listing may stop and its token continues from there.
	q := store.Query{Index: store.GSI1, PK: reviewItemsPK(queue, state), After: nextToken}
	size := 0
	for range 5 {
		q.Limit = limit - len(out.Items)
		p, err := s.store.Query(ctx, q)
		if errors.Is(err, store.ErrInvalid) {
			return ReviewItemsPage{}, errs.Fields("invalid query", []errs.FieldError{{Path: "nextToken", Message: "is not a token this listing gave"}})
		}
		if err != nil {
			return ReviewItemsPage{}, wrap(err)
		}
		for i, it := range p.Items {
			r, err := decode[reviewItemRecord](it)
			if err != nil {
				return ReviewItemsPage{}, wrap(err)
			}
			if !who.May(r.AgentID) || assignee != "" && !slices.Contains(r.Assignees, assignee) {
				continue
			}
			if len(out.Items) > 0 && size+len(it.Data) > reviewItemsPageBytes {
				// Full: the page ends before this item, and the token is
				// the one a page of the items read so far would give.
				q.Limit = i
				if i == 0 {
					out.NextToken = q.After
					return out, nil
				}
				short, err := s.store.Query(ctx, q)
				if err != nil {
					return ReviewItemsPage{}, wrap(err)
				}
				out.NextToken = short.Next
				return out, nil
			}
			size += len(it.Data)
			out.Items = append(out.Items, r.view(who.Principal))
		}
		out.NextToken = p.Next
		if p.Next == "" || len(out.Items) == limit {
			return out, nil
		}
		q.After = p.Next
	}
	return out, nil
}

// ReviewAgreement measures how a queue's reviewers (and the judge, on
// calibration items) agree on each criterion, over the done items the
// reviewer may read (at most maxAgreementItems, the newest left out:
// Truncated says so).
// Errors: NotFound for a queue the reviewer does not see.
func (s *Service) ReviewAgreement(ctx context.Context, who Reviewer, queue string) (AgreementView, error) {
	q, err := s.ReviewQueue(ctx, who.Agents, queue)
	if err != nil {
		return AgreementView{}, err
	}
	var items []review.Item
	truncated := false
	err = eachOf(ctx, s.store, store.Query{Index: store.GSI1, PK: reviewItemsPK(queue, review.Done)}, func(it store.Item) error {
		if len(items) == maxAgreementItems {
			truncated = true
			return errStopEach
		}
		r, err := decode[reviewItemRecord](it)
		if err != nil {
			return err
		}
		// An item made when the queue took another number of reviews
		// is counted as skipped (Measure). Only what Measure reads is
		// kept: the labels, not the text.
		if who.May(r.AgentID) {
			items = append(items, r.labels())
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopEach) {
		return AgreementView{}, wrap(err)
	}
	return AgreementView{QueueID: queue, ReviewsPerItem: q.ReviewsPerItem, Criteria: review.Measure(items, q.ReviewsPerItem),
		Truncated: truncated, MeasuredAt: expect.FormatTime(s.now())}, nil
}

var errStopEach = errors.New("enough")

// AgreementView is GET /v1/review-queues/{queueId}/agreement.
type AgreementView struct {
	QueueID        string             `json:"queueId"`
	ReviewsPerItem int                `json:"reviewsPerItem"`
	Criteria       []review.Agreement `json:"criteria"`
	Truncated      bool               `json:"truncated,omitempty"`
	MeasuredAt     string             `json:"measuredAt"`
}

// reviewItemRecord is a review item as stored: the domain's item and what
// the watcher has done with its due time.
type reviewItemRecord struct {
	review.Item
	// DueRaised: the watcher keeps the due time (or cannot: DueNote);
	// DueSatisfied: told the reviews are in.
	DueRaised    bool   `json:"dueRaised,omitempty"`
	DueSatisfied bool   `json:"dueSatisfied,omitempty"`
	DueNote      string `json:"dueNote,omitempty"`
	ExpiresAt    string `json:"expiresAt,omitempty"`
	UpdatedAt    string `json:"updatedAt,omitempty"`
}

// labels is the item as Measure reads it: its criteria's ids and judge
// grades, its assignees, and each review's and resolution's PASS or FAIL.
func (r *reviewItemRecord) labels() review.Item {
	out := review.Item{State: r.State, Assignees: r.Assignees, Criteria: make([]review.Criterion, len(r.Criteria)),
		Reviews: make([]review.Review, len(r.Reviews)), Resolved: map[string]review.Resolution{}}
	for i, c := range r.Criteria {
		out.Criteria[i] = review.Criterion{CriterionID: c.CriterionID, Judge: c.Judge}
	}
	for i, rv := range r.Reviews {
		out.Reviews[i] = review.Review{Reviewer: rv.Reviewer, CriterionID: rv.CriterionID, Pass: rv.Pass}
	}
	for id, res := range r.Resolved {
		out.Resolved[id] = review.Resolution{Grade: review.Grade{Pass: res.Pass}}
	}
	return out
}

// needsWatcher reports whether the item's due time waits on the watcher.
func (r *reviewItemRecord) needsWatcher() bool {
	return !r.DueRaised || r.State == review.Done && !r.DueSatisfied
}

// reviewItemItem maps an item onto its store item. Its JSON is written
// without HTML escaping: a comment full of '<' or '&' must cost its own
// size, not six times that.
func reviewItemItem(r *reviewItemRecord) (store.Item, error) {
	created, _ := expect.ParseTime(r.CreatedAt)
	idx := map[store.IndexName]store.IndexKey{
		store.GSI1: {PK: reviewItemsPK(r.QueueID, r.State), SK: sortTime(created) + "#" + esc(r.ItemID)},
		store.GSI2: {PK: reviewItemsOfPK(r.AgentID), SK: esc(r.ItemID)},
	}
	if r.needsWatcher() {
		updated, _ := expect.ParseTime(r.UpdatedAt)
		idx[store.GSI5] = store.IndexKey{PK: reviewFixPK, SK: sortTime(updated) + "#" + esc(r.ItemID)}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return store.Item{}, err
	}
	item := store.Item{Key: reviewItemKey(r.ItemID), Type: TypeReviewItem, Data: bytes.TrimSuffix(buf.Bytes(), []byte("\n")), Index: idx}
	return expiring(item, nil)(r.ExpiresAt)
}

// ReviewItemView is a review item as a reviewer sees it. While it is
// open, a reviewer sees only their own reviews (blind review: one
// reviewer's grade must not sway another's); once done, all of them.
type ReviewItemView struct {
	ItemID           string                       `json:"itemId"`
	QueueID          string                       `json:"queueId"`
	Purpose          string                       `json:"purpose"`
	AgentID          string                       `json:"agentId"`
	PlanID           string                       `json:"planId"`
	VerificationID   string                       `json:"verificationId"`
	State            string                       `json:"state"`
	Criteria         []review.Criterion           `json:"criteria"`
	Assignees        []string                     `json:"assignees"`
	Pending          []string                     `json:"pending"`
	Reviews          []review.Review              `json:"reviews"`
	ReviewsIn        int                          `json:"reviewsIn"`
	ReviewsExpected  int                          `json:"reviewsExpected"`
	Resolve          review.Rule                  `json:"resolve"`
	Resolved         map[string]review.Resolution `json:"resolved,omitempty"`
	CreatedAt        string                       `json:"createdAt"`
	DueAt            string                       `json:"dueAt"`
	DoneAt           string                       `json:"doneAt,omitempty"`
	DueExpectationID string                       `json:"dueExpectationId,omitempty"`
	DueNote          string                       `json:"dueNote,omitempty"`
}

func (r *reviewItemRecord) view(principal string) ReviewItemView {
	v := ReviewItemView{ItemID: r.ItemID, QueueID: r.QueueID, Purpose: r.Purpose, AgentID: r.AgentID, PlanID: r.PlanID,
		VerificationID: r.VerificationID, State: r.State, Criteria: r.Criteria, Assignees: r.Assignees, Pending: r.Pending(),
		Reviews: []review.Review{}, ReviewsIn: len(r.Reviews), ReviewsExpected: len(r.Assignees) * len(r.Criteria),
		Resolve: r.Resolve, Resolved: r.Resolved, CreatedAt: r.CreatedAt, DueAt: r.DueAt, DoneAt: r.DoneAt, DueNote: r.DueNote}
	if v.Pending == nil {
		v.Pending = []string{}
	}
	if r.DueRaised && r.DueNote == "" {
		v.DueExpectationID = expect.ReviewIDPrefix + r.ItemID
	}
	for _, rv := range r.Reviews {
		if r.State == review.Done || rv.Reviewer == principal {
			v.Reviews = append(v.Reviews, rv)
		}
	}
	// A calibration item hides the judge's grade until it is done, for
	// the same reason.
	if r.State != review.Done {
		v.Criteria = slices.Clone(r.Criteria)
		for i := range v.Criteria {
			v.Criteria[i].Judge = nil
		}
	}
	return v
}

// ReviewItem returns one item of queue as the reviewer sees it. Errors:
// NotFound for an unknown item, one of another queue, or one the reviewer
// may not read.
func (s *Service) ReviewItem(ctx context.Context, who Reviewer, queue, itemID string) (ReviewItemView, error) {
	it, err := s.store.Get(ctx, reviewItemKey(itemID))
	if errors.Is(err, store.ErrNotFound) {
		return ReviewItemView{}, errs.E(errs.NotFound, "no review item %q in queue %q", itemID, queue)
	}
	if err != nil {
		return ReviewItemView{}, wrap(err)
	}
	r, err := decode[reviewItemRecord](it)
	if err != nil {
		return ReviewItemView{}, wrap(err)
	}
	if r.QueueID != queue || !who.May(r.AgentID) {
		return ReviewItemView{}, errs.E(errs.NotFound, "no review item %q in queue %q", itemID, queue)
	}
	return r.view(who.Principal), nil
}

// itemExpiry is when a new item is deleted: with the plan's evidence,
// about -retain-evidence from now (never when evidence is kept forever).
func (s *Service) itemExpiry(now time.Time) string {
	if s.retain <= 0 {
		return ""
	}
	return expect.FormatTime(now.Add(s.retain))
}
