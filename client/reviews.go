package client

import (
	"context"
	"net/url"
	"strconv"
)

// ReviewQueueRequest is the body of PUT /v1/review-queues/{queueId}.
type ReviewQueueRequest struct {
	// Reviewers are principals (the names in the tokens file), assigned
	// round-robin.
	Reviewers []string `json:"reviewers"`
	// ReviewsPerItem is the number of reviews per item (0: the server's
	// default of 1).
	ReviewsPerItem int `json:"reviewsPerItem,omitempty"`
	// Due is an ISO 8601 duration from an item's creation to its due
	// time ("": P1D).
	Due string `json:"due,omitempty"`
	// Resolve is majority, all-pass or mean ("": majority).
	Resolve string `json:"resolve,omitempty"`
}

// ReviewQueue is a review queue as the server keeps it.
type ReviewQueue struct {
	QueueID        string   `json:"queueId"`
	Reviewers      []string `json:"reviewers"`
	ReviewsPerItem int      `json:"reviewsPerItem"`
	Due            string   `json:"due"`
	Resolve        string   `json:"resolve"`
	// Owners are the agents of the token that created it.
	Owners    []string `json:"owners"`
	CreatedAt string   `json:"createdAt,omitempty"`
	UpdatedAt string   `json:"updatedAt,omitempty"`
}

// ReviewGrade is a score with its PASS or FAIL.
type ReviewGrade struct {
	Score float64 `json:"score"`
	Pass  bool    `json:"pass"`
}

// ReviewCriterion is a criterion an item asks its reviewers to grade.
type ReviewCriterion struct {
	CriterionID      string  `json:"criterionId"`
	Category         string  `json:"category"`
	Description      string  `json:"description"`
	Assertion        string  `json:"assertion"`
	PassingThreshold float64 `json:"passingThreshold"`
	Anti             bool    `json:"anti,omitempty"`
	// Judge is, on a done calibration item, the judge's grade.
	Judge *ReviewGrade `json:"judge,omitempty"`
}

// Review is one reviewer's grade of one criterion.
type Review struct {
	Reviewer    string  `json:"reviewer"`
	CriterionID string  `json:"criterionId"`
	Grade       string  `json:"grade"`
	Score       float64 `json:"score"`
	Pass        bool    `json:"pass"`
	Comment     string  `json:"comment,omitempty"`
	At          string  `json:"at"`
}

// ReviewResolution is the grade a criterion's reviews resolved into.
type ReviewResolution struct {
	Score     float64 `json:"score"`
	Pass      bool    `json:"pass"`
	Rule      string  `json:"rule"`
	Rationale string  `json:"rationale"`
}

// ReviewItem is one plan's criteria in a queue. While it is open, Reviews
// holds only the caller's own.
type ReviewItem struct {
	ItemID           string                      `json:"itemId"`
	QueueID          string                      `json:"queueId"`
	Purpose          string                      `json:"purpose"` // grading or calibration
	AgentID          string                      `json:"agentId"`
	PlanID           string                      `json:"planId"`
	VerificationID   string                      `json:"verificationId"`
	State            string                      `json:"state"` // open or done
	Criteria         []ReviewCriterion           `json:"criteria"`
	Assignees        []string                    `json:"assignees"`
	Pending          []string                    `json:"pending"`
	Reviews          []Review                    `json:"reviews"`
	ReviewsIn        int                         `json:"reviewsIn"`
	ReviewsExpected  int                         `json:"reviewsExpected"`
	Resolve          string                      `json:"resolve"`
	Resolved         map[string]ReviewResolution `json:"resolved,omitempty"`
	CreatedAt        string                      `json:"createdAt"`
	DueAt            string                      `json:"dueAt"`
	DoneAt           string                      `json:"doneAt,omitempty"`
	DueExpectationID string                      `json:"dueExpectationId,omitempty"`
	DueNote          string                      `json:"dueNote,omitempty"`
}

// ReviewItemsPage is one page of a queue's items.
type ReviewItemsPage struct {
	Items     []ReviewItem `json:"items"`
	NextToken string       `json:"nextToken,omitempty"`
}

// ReviewItemsQuery selects a queue's items: Assignee "me" (the token's
// principal) or a principal's name, State open or done ("": open).
type ReviewItemsQuery struct {
	Assignee  string
	State     string
	Limit     int
	NextToken string
}

// CriterionAgreement is how a queue's reviewers, and the judge, agree on
// one criterion. Kappa is nil when undefined.
type CriterionAgreement struct {
	CriterionID string   `json:"criterionId"`
	Method      string   `json:"method,omitempty"` // cohen or fleiss
	Kappa       *float64 `json:"kappa"`
	Observed    *float64 `json:"observed"`
	Items       int      `json:"items"`
	Skipped     int      `json:"skipped,omitempty"`
	Judge       *struct {
		Kappa    *float64 `json:"kappa"`
		Observed *float64 `json:"observed"`
		Items    int      `json:"items"`
	} `json:"judge,omitempty"`
}

// ReviewAgreement is GET /v1/review-queues/{queueId}/agreement.
type ReviewAgreement struct {
	QueueID        string               `json:"queueId"`
	ReviewsPerItem int                  `json:"reviewsPerItem"`
	Criteria       []CriterionAgreement `json:"criteria"`
	Truncated      bool                 `json:"truncated,omitempty"`
	MeasuredAt     string               `json:"measuredAt"`
}

// PutReviewQueue creates or replaces a review queue owned by the token's
// agents. Errors (*Error): 400 naming the field, 404 for another tenant's
// queue, 409 for one whose owners differ or past the limits, 401, 403.
func (c *Client) PutReviewQueue(ctx context.Context, queueID string, req ReviewQueueRequest) (*ReviewQueue, error) {
	var out ReviewQueue
	if err := c.do(ctx, call{method: "PUT", path: "/v1/review-queues/" + seg(queueID), body: &req, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReviewQueue reads a queue. Errors (*Error): 404 (also for another
// tenant's), 401, 403.
func (c *Client) ReviewQueue(ctx context.Context, queueID string) (*ReviewQueue, error) {
	var out ReviewQueue
	if err := c.do(ctx, call{method: "GET", path: "/v1/review-queues/" + seg(queueID), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListReviewQueues lists the queues the token sees. Errors (*Error): 401,
// 403.
func (c *Client) ListReviewQueues(ctx context.Context) ([]ReviewQueue, error) {
	var out struct {
		Queues []ReviewQueue `json:"queues"`
	}
	if err := c.do(ctx, call{method: "GET", path: "/v1/review-queues", out: &out}); err != nil {
		return nil, err
	}
	return out.Queues, nil
}

// DeleteReviewQueue deletes a queue (its items stay). Errors (*Error):
// 404, 409 for another token's agents' queue, 401, 403.
func (c *Client) DeleteReviewQueue(ctx context.Context, queueID string) error {
	return c.do(ctx, call{method: "DELETE", path: "/v1/review-queues/" + seg(queueID)})
}

// ReviewItems returns one page of a queue's items, oldest first. Errors
// (*Error): 400 naming state, limit or nextToken, 404, 401, 403.
func (c *Client) ReviewItems(ctx context.Context, queueID string, q ReviewItemsQuery) (*ReviewItemsPage, error) {
	v := url.Values{}
	if q.Assignee != "" {
		v.Set("assignee", q.Assignee)
	}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.NextToken != "" {
		v.Set("nextToken", q.NextToken)
	}
	var out ReviewItemsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/review-queues/" + seg(queueID) + "/items", query: v.Encode(), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReviewItem reads one item. Errors (*Error): 404 (also for one the token
// may not read), 401, 403.
func (c *Client) ReviewItem(ctx context.Context, queueID, itemID string) (*ReviewItem, error) {
	var out ReviewItem
	if err := c.do(ctx, call{method: "GET", path: "/v1/review-queues/" + seg(queueID) + "/items/" + seg(itemID), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitReview grades one criterion of an item assigned to the token's
// principal: grade is "PASS", "FAIL" or a score in [0, 1] (a float64). It
// is sent once (a review is never changed, so a retry after a lost answer
// would meet 409). Errors (*Error): 400 naming the field, 404 for an item
// not assigned to the caller, 409 for a criterion already reviewed or a
// done item, 401, 403.
func (c *Client) SubmitReview(ctx context.Context, queueID, itemID, criterionID string, grade any, comment string) (*ReviewItem, error) {
	body := map[string]any{"criterionId": criterionID, "grade": grade}
	if comment != "" {
		body["comment"] = comment
	}
	var out ReviewItem
	if err := c.do(ctx, call{method: "POST", path: "/v1/review-queues/" + seg(queueID) + "/items/" + seg(itemID) + "/reviews", body: body, once: true, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReviewAgreement reads a queue's agreement. Errors (*Error): 404, 401,
// 403.
func (c *Client) ReviewAgreement(ctx context.Context, queueID string) (*ReviewAgreement, error) {
	var out ReviewAgreement
	if err := c.do(ctx, call{method: "GET", path: "/v1/review-queues/" + seg(queueID) + "/agreement", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
