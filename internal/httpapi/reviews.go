package httpapi

import (
	"context"
	"net/http"

	"github.com/agentclock/clockwork/internal/evaluation"
)

// The review queue routes: queues (grades:write, owned like channels by
// the agents of the token that created them), their items and reviews,
// and agreement. An item is read and reviewed only through a token acting
// for its plan's agent; another tenant's queue or item answers 404.

// reviewerOf is the evaluation service's view of the request's principal
// as a reviewer.
func reviewerOf(ctx context.Context) evaluation.Reviewer {
	who := evaluation.Reviewer{May: actsForCtx(ctx)}
	if p := PrincipalOf(ctx); p != nil {
		who.Principal, who.Agents = p.Name, p.Agents
	}
	return who
}

func (h *Handler) putReviewQueue(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	q, created, err := h.Eval.PutReviewQueue(r.Context(), reviewerOf(r.Context()).Agents, r.PathValue("queueId"), b)
	if err != nil {
		return err
	}
	writeJSON(w, createdOrOK(created), q)
	return nil
}

func (h *Handler) getReviewQueue(w http.ResponseWriter, r *http.Request) error {
	q, err := h.Eval.ReviewQueue(r.Context(), reviewerOf(r.Context()).Agents, r.PathValue("queueId"))
	return respond(w, http.StatusOK, q, err)
}

func (h *Handler) listReviewQueues(w http.ResponseWriter, r *http.Request) error {
	qs, err := h.Eval.ReviewQueues(r.Context(), reviewerOf(r.Context()).Agents)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs})
	return nil
}

func (h *Handler) deleteReviewQueue(w http.ResponseWriter, r *http.Request) error {
	if err := h.Eval.DeleteReviewQueue(r.Context(), reviewerOf(r.Context()).Agents, r.PathValue("queueId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listReviewItems is GET /v1/review-queues/{queueId}/items?assignee=&state=&limit=&nextToken=;
// assignee "me" is the token's principal.
func (h *Handler) listReviewItems(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := h.reviewItemsOp(r.Context(), r.PathValue("queueId"), q.Get("assignee"), q.Get("state"), limit, q.Get("nextToken"))
	return respond(w, http.StatusOK, page, err)
}

// reviewItemsOp is shared by the route and its MCP tool.
func (h *Handler) reviewItemsOp(ctx context.Context, queue, assignee, state string, limit int, next string) (evaluation.ReviewItemsPage, error) {
	who := reviewerOf(ctx)
	if assignee == "me" {
		assignee = who.Principal
	}
	// Another principal's assignments are listed as this token's
	// principal sees them: never that principal's reviews of an open item.
	return h.Eval.ReviewItems(ctx, who, queue, state, assignee, limit, next)
}

func (h *Handler) getReviewItem(w http.ResponseWriter, r *http.Request) error {
	it, err := h.Eval.ReviewItem(r.Context(), reviewerOf(r.Context()), r.PathValue("queueId"), r.PathValue("itemId"))
	return respond(w, http.StatusOK, it, err)
}

// postReview is POST /v1/review-queues/{queueId}/items/{itemId}/reviews:
// it answers 201 with the item as the reviewer now sees it.
func (h *Handler) postReview(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	it, err := h.Eval.SubmitReview(r.Context(), reviewerOf(r.Context()), r.PathValue("queueId"), r.PathValue("itemId"), b)
	return respond(w, http.StatusCreated, it, err)
}

func (h *Handler) getReviewAgreement(w http.ResponseWriter, r *http.Request) error {
	a, err := h.Eval.ReviewAgreement(r.Context(), reviewerOf(r.Context()), r.PathValue("queueId"))
	return respond(w, http.StatusOK, a, err)
}
