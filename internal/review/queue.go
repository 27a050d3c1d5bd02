// Package review is the domain of human review queues: a queue's
// configuration, the items a completed plan's HUMAN criteria (and a sample
// of a judge's HEURISTIC grades) become, their round-robin assignment,
// reviews, how several reviews resolve into one grade, and how well
// reviewers (and the judge) agree. It does no I/O: callers load a queue and
// its items, call these functions with the clock, and store what they
// return.
package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// Limits on a queue.
const (
	MaxReviewers      = 50
	MaxReviewsPerItem = 5
	MaxPrincipalLen   = 128
	// MaxCommentLen bounds a review's comment, in bytes: an item holds
	// every review of up to anticipate.MaxQueued criteria, and must stay
	// well within a DynamoDB item (400 KB) however its text escapes.
	MaxCommentLen = 1000
	// MaxCriterionText bounds the copy of a criterion's description and
	// of its assertion an item keeps (the ANTICIPATE keeps them whole).
	MaxCriterionText = 2000
	// MinDue and MaxDue bound a queue's due time: a second at least (a
	// queue of automated reviewers, or a test, may be that quick);
	// longer than 30 days is no due time.
	MinDue = time.Second
	MaxDue = 30 * 24 * time.Hour
	// DefaultDue is a queue's due time when it names none.
	DefaultDue = "P1D"
)

// Rule says how the reviews of one criterion resolve into its grade.
type Rule string

// The resolution rules.
const (
	// Majority: the PASS or FAIL most reviews gave, scored by the mean
	// of those reviews' scores; a tie does not pass (FAIL).
	Majority Rule = "majority"
	// AllPass: PASS only when every review passes; the lowest score.
	AllPass Rule = "all-pass"
	// Mean: the mean of the reviews' scores, graded as any score is.
	Mean Rule = "mean"
)

// Queue is a review queue: who reviews, how many reviews each item gets,
// by when, and how they resolve.
type Queue struct {
	QueueID        string   `json:"queueId"`
	Reviewers      []string `json:"reviewers"`
	ReviewsPerItem int      `json:"reviewsPerItem"`
	Due            string   `json:"due"`
	Resolve        Rule     `json:"resolve"`
	// Owners are the agents of the token that created it: the queue
	// serves their plans, and only a token acting for them sees it.
	Owners    []string `json:"owners"`
	CreatedAt string   `json:"createdAt,omitempty"`
	UpdatedAt string   `json:"updatedAt,omitempty"`
	// Next is where the round-robin continues (an index into Reviewers).
	Next int `json:"next,omitempty"`
}

type queueBody struct {
	Reviewers      []string `json:"reviewers"`
	ReviewsPerItem *int     `json:"reviewsPerItem"`
	Due            string   `json:"due"`
	Resolve        Rule     `json:"resolve"`
}

var queueIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidQueueID returns "" for a valid queue id, else the reason.
func ValidQueueID(id string) string {
	if !queueIDPattern.MatchString(id) {
		return "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	return ""
}

// ParseQueue validates a PUT body for queue id and returns the queue
// without owners, times or cursor. Missing fields take their defaults:
// reviewsPerItem 1, due DefaultDue, resolve majority. Errors: an Invalid
// error naming each failing field.
func ParseQueue(id string, body []byte) (Queue, error) {
	var c errs.Collector
	if msg := ValidQueueID(id); msg != "" {
		c.Add("queueId", "%s", msg)
	}
	var b queueBody
	if err := decodeOne(body, &b); err != nil {
		return Queue{}, errs.Fields("the body is not a review queue", []errs.FieldError{{Path: "body", Message: err.Error()}})
	}
	q := Queue{QueueID: id, Reviewers: b.Reviewers, ReviewsPerItem: 1, Due: b.Due, Resolve: b.Resolve}
	switch {
	case len(b.Reviewers) == 0:
		c.Add("reviewers", "must name at least one principal (the names in the tokens file)")
	case len(b.Reviewers) > MaxReviewers:
		c.Add("reviewers", "names more than %d principals", MaxReviewers)
	}
	seen := map[string]bool{}
	for i, r := range b.Reviewers {
		if msg := validPrincipal(r); msg != "" {
			c.Add(fmt.Sprintf("reviewers[%d]", i), "%s", msg)
		} else if seen[r] {
			c.Add(fmt.Sprintf("reviewers[%d]", i), "repeats %q: a reviewer is named once", r)
		}
		seen[r] = true
	}
	if b.ReviewsPerItem != nil {
		q.ReviewsPerItem = *b.ReviewsPerItem
		switch n := *b.ReviewsPerItem; {
		case n < 1 || n > MaxReviewsPerItem:
			c.Add("reviewsPerItem", "must be between 1 and %d", MaxReviewsPerItem)
		case len(b.Reviewers) > 0 && n > len(b.Reviewers):
			c.Add("reviewsPerItem", "is %d, more than the %d reviewers: an item is never reviewed twice by one principal", n, len(b.Reviewers))
		}
	}
	if q.Due == "" {
		q.Due = DefaultDue
	}
	if d, err := expect.ParseDuration(q.Due); err != nil {
		c.Add("due", "%s", err.Error())
	} else if span := d.AddTo(epoch).Sub(epoch); span < MinDue || span > MaxDue {
		c.Add("due", "must be between PT1S and P30D")
	}
	switch q.Resolve {
	case "":
		q.Resolve = Majority
	case Majority, AllPass, Mean:
	default:
		c.Add("resolve", "must be majority, all-pass or mean")
	}
	if err := c.Err("invalid review queue"); err != nil {
		return Queue{}, err
	}
	return q, nil
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DueAt returns when an item created at now is due under q.
func (q *Queue) DueAt(now time.Time) time.Time {
	d, err := expect.ParseDuration(q.Due)
	if err != nil {
		d, _ = expect.ParseDuration(DefaultDue)
	}
	return d.AddTo(now)
}

// validPrincipal returns "" for a valid principal name, else the reason.
// "me" and "*" are refused: the first means the caller in a listing's
// assignee, the second every agent in a token's agents.
func validPrincipal(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxPrincipalLen:
		return fmt.Sprintf("is longer than %d bytes", MaxPrincipalLen)
	case s == "me" || s == "*":
		return fmt.Sprintf("%q is reserved (the caller in ?assignee=me; every agent in a token)", s)
	case strings.TrimSpace(s) != s:
		return "starts or ends with white space"
	case !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
	}) >= 0:
		return "contains a control or formatting character"
	}
	return ""
}

// decodeOne decodes exactly one JSON value of body into v, refusing
// unknown fields and anything after the value.
func decodeOne(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errors.New("holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("holds more than one JSON value")
	}
	return nil
}

// Serves reports whether q takes items of agentID's plans.
func (q *Queue) Serves(agentID string) bool {
	return slices.Contains(q.Owners, "*") || slices.Contains(q.Owners, agentID)
}

// VisibleTo reports whether a token acting for agents sees q: an operator
// (acting for every agent) sees every queue, a tenant those serving one
// of its agents.
func (q *Queue) VisibleTo(agents []string) bool {
	if slices.Contains(agents, "*") {
		return true
	}
	for _, a := range agents {
		if slices.Contains(q.Owners, a) {
			return true
		}
	}
	return false
}

// ReplaceableBy reports whether a token acting for agents may replace or
// delete q: one acting for the same agents, or an operator.
func (q *Queue) ReplaceableBy(agents []string) bool {
	return slices.Contains(agents, "*") || SameAgents(agents, q.Owners)
}

// SameAgents reports whether a and b hold the same agents, in any order.
func SameAgents(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// Assign picks q.ReviewsPerItem reviewers round-robin from q.Next,
// skipping those in exclude (the principal that declared the plan's
// criteria may not review its own plan), and advances q.Next past the
// last one examined. It returns fewer when too few reviewers are
// eligible, and none when none is.
func Assign(q *Queue, exclude ...string) []string {
	n := len(q.Reviewers)
	if n == 0 {
		return nil
	}
	start := ((q.Next % n) + n) % n
	var out []string
	for i := 0; i < n && len(out) < q.ReviewsPerItem; i++ {
		r := q.Reviewers[(start+i)%n]
		q.Next = (start + i + 1) % n
		if slices.Contains(exclude, r) || slices.Contains(out, r) {
			continue
		}
		out = append(out, r)
	}
	return out
}
