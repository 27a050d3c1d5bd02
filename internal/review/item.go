package review

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// MaxRationaleLen bounds a resolution's rationale, in bytes.
const MaxRationaleLen = 500

// Item states.
const (
	Open = "open"
	Done = "done"
)

// Purposes of an item.
const (
	// Grading: the reviews decide the criteria's grades on the VERIFY.
	Grading = "grading"
	// Calibration: the judge graded the criterion; the reviews only
	// measure how people agree with it.
	Calibration = "calibration"
)

// Criterion is one criterion an item asks its reviewers to grade.
type Criterion struct {
	CriterionID string `json:"criterionId"`
	Category    string `json:"category"`
	Description string `json:"description"`
	Assertion   string `json:"assertion"`
	// PassingThreshold is the plan's; an anti criterion passes only at
	// score 1.
	PassingThreshold float64 `json:"passingThreshold"`
	Anti             bool    `json:"anti,omitempty"`
	// Judge is the judge's grade of a calibration item's criterion.
	Judge *Grade `json:"judge,omitempty"`
}

// Passes reports whether score passes c (as VERIFY grades it).
func (c *Criterion) Passes(score float64) bool {
	if c.Anti {
		return score == 1
	}
	return score >= c.PassingThreshold
}

// Grade is a score with its PASS or FAIL.
type Grade struct {
	Score float64 `json:"score"`
	Pass  bool    `json:"pass"`
}

// Review is one reviewer's grade of one criterion of an item.
type Review struct {
	Reviewer    string  `json:"reviewer"`
	CriterionID string  `json:"criterionId"`
	Grade       string  `json:"grade"` // PASS, FAIL or the score given
	Score       float64 `json:"score"`
	Pass        bool    `json:"pass"`
	Comment     string  `json:"comment,omitempty"`
	At          string  `json:"at"`
}

// Resolution is the grade a criterion's reviews resolved into.
type Resolution struct {
	Grade
	Rule      Rule   `json:"rule"`
	Rationale string `json:"rationale"`
}

// Item is one plan's criteria sent to one queue for review.
type Item struct {
	ItemID         string      `json:"itemId"`
	QueueID        string      `json:"queueId"`
	Purpose        string      `json:"purpose"`
	AgentID        string      `json:"agentId"`
	PlanID         string      `json:"planId"`
	VerificationID string      `json:"verificationId"`
	Criteria       []Criterion `json:"criteria"`
	// Assignees are the reviewers, in assignment order.
	Assignees []string `json:"assignees"`
	// ReviewsPerItem and Resolve are the queue's when the item was made.
	ReviewsPerItem int                   `json:"reviewsPerItem"`
	Resolve        Rule                  `json:"resolve"`
	Reviews        []Review              `json:"reviews"`
	State          string                `json:"state"`
	CreatedAt      string                `json:"createdAt"`
	DueAt          string                `json:"dueAt"`
	DoneAt         string                `json:"doneAt,omitempty"`
	Resolved       map[string]Resolution `json:"resolved,omitempty"`
}

// ItemID returns the deterministic id of the item of verification vid in
// queue: a replayed VERIFY makes the same item, never a second one. A
// calibration item also names its criterion.
func ItemID(vid, queue, purpose, criterionID string) string {
	sum := sha256.Sum256([]byte(vid + "\x00" + queue + "\x00" + purpose + "\x00" + criterionID))
	return "rvi-" + hex.EncodeToString(sum[:12])
}

// Sampled reports whether the judge's grade of criterionID on
// verification vid is in a calibration sample of the given rate: a
// deterministic draw, so a replay decides as the first run did.
func Sampled(vid, criterionID string, rate float64) bool {
	if rate <= 0 {
		return false
	}
	sum := sha256.Sum256([]byte("calibrate\x00" + vid + "\x00" + criterionID))
	u := float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
	return u < rate
}

// ReviewInput is a POSTed review.
type ReviewInput struct {
	CriterionID string          `json:"criterionId"`
	Grade       json.RawMessage `json:"grade"`
	Comment     string          `json:"comment"`
}

// ParseReview validates a POSTed review body. grade is "PASS", "FAIL" or
// a number in [0, 1]. Errors: an Invalid error naming each failing field.
func ParseReview(body []byte) (ReviewInput, string, float64, error) {
	var in ReviewInput
	if err := decodeOne(body, &in); err != nil {
		return in, "", 0, errs.Fields("the body is not a review", []errs.FieldError{{Path: "body", Message: err.Error()}})
	}
	var c errs.Collector
	if msg := expect.ValidID(in.CriterionID); msg != "" {
		c.Add("criterionId", "%s", msg)
	}
	grade, score := "", 0.0
	var word string
	var num float64
	switch {
	case len(in.Grade) == 0 || string(in.Grade) == "null":
		c.Add("grade", "is required: PASS, FAIL or a score between 0 and 1")
	case json.Unmarshal(in.Grade, &word) == nil:
		switch word {
		case "PASS":
			grade, score = "PASS", 1
		case "FAIL":
			grade, score = "FAIL", 0
		default:
			c.Add("grade", "must be PASS, FAIL or a score between 0 and 1, got %q", truncate(word, 32))
		}
	case json.Unmarshal(in.Grade, &num) == nil:
		if math.IsNaN(num) || num < 0 || num > 1 {
			c.Add("grade", "must be a score between 0 and 1 inclusive, got %v", num)
		} else {
			if num == 0 {
				num = 0 // not -0
			}
			grade, score = strconv.FormatFloat(num, 'f', -1, 64), num
		}
	default:
		c.Add("grade", "must be PASS, FAIL or a score between 0 and 1")
	}
	if len(in.Comment) > MaxCommentLen || !utf8.ValidString(in.Comment) ||
		strings.IndexFunc(in.Comment, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' }) >= 0 {
		c.Add("comment", "must be at most %d bytes, none of them a control character but line breaks and tabs", MaxCommentLen)
	}
	if err := c.Err("invalid review"); err != nil {
		return in, "", 0, err
	}
	return in, grade, score, nil
}

// Truncate cuts s to at most n bytes, at a character boundary, marking
// the cut with an ellipsis.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func truncate(s string, n int) string { return Truncate(s, n) }

// criterion returns the item's criterion id, or nil.
func (it *Item) criterion(id string) *Criterion {
	for i := range it.Criteria {
		if it.Criteria[i].CriterionID == id {
			return &it.Criteria[i]
		}
	}
	return nil
}

// AddReview records reviewer's grade of one criterion at now and, when it
// is the last review the item waits for, resolves every criterion and
// marks the item done (done is then true). it is changed only on success.
//
// Errors: NotFound when reviewer is not an assignee (the item is not
// theirs to see); Invalid naming criterionId when the item has no such
// criterion; Conflict when the item is done or the reviewer already
// graded that criterion.
func (it *Item) AddReview(reviewer string, in ReviewInput, grade string, score float64, now time.Time) (done bool, err error) {
	if !slices.Contains(it.Assignees, reviewer) {
		return false, errs.E(errs.NotFound, "no review item %q assigned to %s", it.ItemID, reviewer)
	}
	c := it.criterion(in.CriterionID)
	if c == nil {
		ids := make([]string, len(it.Criteria))
		for i := range it.Criteria {
			ids[i] = it.Criteria[i].CriterionID
		}
		return false, errs.Fields("invalid review", []errs.FieldError{{Path: "criterionId",
			Message: fmt.Sprintf("%q is not a criterion of item %s (its criteria: %s)", truncate(in.CriterionID, 64), it.ItemID, strings.Join(ids, ", "))}})
	}
	if it.State == Done {
		return false, errs.E(errs.Conflict, "review item %s is done: every assigned review is in", it.ItemID)
	}
	for _, r := range it.Reviews {
		if r.Reviewer == reviewer && r.CriterionID == in.CriterionID {
			return false, errs.E(errs.Conflict, "%s already reviewed criterion %s of item %s (%s); a review is never changed", reviewer, in.CriterionID, it.ItemID, r.Grade)
		}
	}
	it.Reviews = append(it.Reviews, Review{Reviewer: reviewer, CriterionID: in.CriterionID, Grade: grade, Score: score,
		Pass: c.Passes(score), Comment: in.Comment, At: expect.FormatTime(now)})
	if len(it.Reviews) < len(it.Assignees)*len(it.Criteria) {
		return false, nil
	}
	it.State, it.DoneAt = Done, expect.FormatTime(now)
	it.Resolved = map[string]Resolution{}
	for i := range it.Criteria {
		it.Resolved[it.Criteria[i].CriterionID] = it.resolve(&it.Criteria[i])
	}
	return true, nil
}

// ReviewsOf returns the reviews of one criterion, in assignment order.
func (it *Item) ReviewsOf(criterionID string) []Review {
	var out []Review
	for _, a := range it.Assignees {
		for _, r := range it.Reviews {
			if r.Reviewer == a && r.CriterionID == criterionID {
				out = append(out, r)
			}
		}
	}
	return out
}

// Pending returns the reviewers who still owe a review, in order.
func (it *Item) Pending() []string {
	var out []string
	for _, a := range it.Assignees {
		n := 0
		for _, r := range it.Reviews {
			if r.Reviewer == a {
				n++
			}
		}
		if n < len(it.Criteria) {
			out = append(out, a)
		}
	}
	return out
}

// resolve resolves one criterion's reviews under the item's rule.
func (it *Item) resolve(c *Criterion) Resolution {
	rs := it.ReviewsOf(c.CriterionID)
	return Resolve(it.Resolve, c, rs)
}

// Resolve resolves reviews of criterion c under rule (see the Rule
// constants). With no reviews it fails with score 0.
func Resolve(rule Rule, c *Criterion, reviews []Review) Resolution {
	out := Resolution{Rule: rule}
	if len(reviews) == 0 {
		out.Rationale = "no reviews"
		return out
	}
	var pass, fail []float64
	all := make([]float64, 0, len(reviews))
	for _, r := range reviews {
		all = append(all, r.Score)
		if r.Pass {
			pass = append(pass, r.Score)
		} else {
			fail = append(fail, r.Score)
		}
	}
	switch rule {
	case AllPass:
		out.Score = slices.Min(all)
		out.Pass = len(fail) == 0 && c.Passes(out.Score)
	case Mean:
		out.Score = round(mean(all))
		out.Pass = c.Passes(out.Score)
	default:
		if len(pass) > len(fail) {
			out.Score, out.Pass = round(mean(pass)), true
		} else {
			out.Score, out.Pass = round(mean(fail)), false
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d reviews resolved by %s:", len(reviews), rule)
	for _, r := range reviews {
		fmt.Fprintf(&b, " %s %s", r.Reviewer, r.Grade)
		if r.Comment != "" {
			fmt.Fprintf(&b, " (%s)", truncate(r.Comment, 80))
		}
		b.WriteString(";")
	}
	// Short: it is kept on the item and on the VERIFY (the comments are
	// on the item whole).
	out.Rationale = truncate(strings.TrimSuffix(b.String(), ";"), MaxRationaleLen)
	return out
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// round keeps 6 decimals, as VERIFY scores do.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
