package watcher

import (
	"context"
	"fmt"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// ReviewExpectationID is the id of item's due time among its agent's
// expectations.
func ReviewExpectationID(itemID string) string { return expect.ReviewIDPrefix + itemID }

// reviewFactKey is the key of the fact that item's last review reports.
func reviewFactKey(itemID string) string { return expect.ReviewIDPrefix + itemID + ":reviewed" }

// reviewKind describes the review-due kind for a card that does not
// declare it: the watcher raises it whatever the card says.
var reviewKind = expect.Kind{Kind: expect.ReviewDueKind, SubjectType: "review-item",
	Describes: "every review assigned for a plan's item in a review queue is in", Basis: "the review queue's due time"}

// RaiseReviewDue raises the due time of review item itemID (of plan
// planID in queue queueID) as an ordinary expectation of the reviewed
// plan's agent, kind expect.ReviewDueKind: a late review lapses, alerts
// and escalates like anything else the agent expects. Raising it again is
// answered as before. Errors: NotFound when the agent has no card (the
// watcher sends lapses to the agent it names).
func (s *Service) RaiseReviewDue(ctx context.Context, agentID, itemID, queueID, planID string, dueAt time.Time) error {
	d := struct{ ItemID, QueueID, PlanID string }{itemID, queueID, planID}
	card, err := s.Card(ctx, agentID)
	if err != nil {
		return err
	}
	// The watcher's own kind, whatever the card declares under its name
	// (a declaration limiting it to some skills would refuse the raise).
	kinds := []expect.Kind{reviewKind}
	for _, k := range card.Declaration.Kinds {
		if k.Kind != expect.ReviewDueKind {
			kinds = append(kinds, k)
		}
	}
	card.Declaration.Kinds = kinds
	id := ReviewExpectationID(d.ItemID)
	req := expect.RaiseRequest{TaskID: id, ContextID: id, Internal: true, Expectations: []expect.Expectation{{
		ExpectationID: id,
		Kind:          expect.ReviewDueKind,
		Subject:       expect.Subject{Type: "review-item", ID: d.ItemID},
		Expects:       fmt.Sprintf("every review of plan %s assigned in review queue %s is in", d.PlanID, d.QueueID),
		SatisfiedBy:   expect.SatisfiedBy{FactKey: reviewFactKey(d.ItemID)},
		DueAt:         expect.FormatTime(dueAt),
		Basis:         fmt.Sprintf("review queue %s's due time", d.QueueID),
	}}}
	_, err = s.raise(ctx, agentID, card, req)
	return err
}

// SatisfyReviewDue reports that item's reviews are all in (at), which
// satisfies its due time; reporting it again changes nothing. Errors:
// NotFound when the agent has no card.
func (s *Service) SatisfyReviewDue(ctx context.Context, agentID, itemID string, at time.Time) error {
	f := expect.Fact{FactKey: reviewFactKey(itemID), ObservedAt: expect.FormatTime(at)}
	_, err := s.reportFacts(ctx, agentID, "clockwork:review-queue", []expect.Fact{f}, expect.ValidateInternalFact)
	return err
}
