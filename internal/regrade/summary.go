package regrade

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"sort"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// Result is one plan's re-grade.
type Result struct {
	PlanID  string `json:"planId"`
	AgentID string `json:"agentId"`
	// Verdict and Score are the re-grade's ("" and nil when Error).
	Verdict anticipate.Verdict `json:"verdict,omitempty"`
	Score   *float64           `json:"score"`
	// OriginalVerdict and OriginalScore are the plan's VERIFY's (of its
	// first ANTICIPATE) as stored when the re-grade read it; "" and nil
	// when it has none.
	OriginalVerdict anticipate.Verdict `json:"originalVerdict,omitempty"`
	OriginalScore   *float64           `json:"originalScore"`
	// OriginalVerificationID names that VERIFY.
	OriginalVerificationID string `json:"originalVerificationId,omitempty"`
	// Criteria are the re-grade's results, as a VERIFY's.
	Criteria []anticipate.Result `json:"criteria"`
	// Verification is the re-grade as a signed VERIFY message of its own
	// (verification_id "evr-…", anticipation_id the evaluation's id,
	// signed by the server's key like every VERIFY): it is never stored
	// as the plan's VERIFY, which a re-grade does not change.
	Verification *anticipate.Verification `json:"verification,omitempty"`
	// Error says why the plan could not be graded (erased since, no
	// policy to grade it with).
	Error string `json:"error,omitempty"`
	// Omitted says what was left out of the stored result, and why (the
	// signed record, when it would make the result too large to store).
	Omitted string `json:"omitted,omitempty"`
	// ExpiresAt is when the plan's evidence expires (not stored): its
	// result expires then too, if that is before the evaluation's.
	ExpiresAt string `json:"-"`
}

// ResultID is the verification_id of a plan's re-grade in an evaluation:
// "evr-" and 32 hex digits of SHA-256 over the evaluation, agent and plan.
func ResultID(evaluationID, agentID, planID string) string {
	sum := sha256.Sum256([]byte(evaluationID + "\x00" + agentID + "\x00" + planID))
	return "evr-" + hex.EncodeToString(sum[:16])
}

// Changed tells whether the re-grade's verdict differs from the
// original's (a plan with no original, or no re-grade, has not changed).
func (r Result) Changed() bool {
	return r.Verdict != "" && r.OriginalVerdict != "" && r.Verdict != r.OriginalVerdict
}

// MaxChanged bounds the plan ids a summary lists as changed (Tally counts
// them all).
const MaxChanged = 1000

// Tally accumulates the summary of an evaluation's results as they come:
// it is stored with the job and advanced with each batch of results.
type Tally struct {
	Graded   int     `json:"graded"`
	Errors   int     `json:"errors"`
	Passed   int     `json:"passed"`
	Pending  int     `json:"pending"`
	ScoreSum float64 `json:"scoreSum"`
	Scored   int     `json:"scored"`
	// ChangedCount counts every changed verdict; Changed lists the first
	// MaxChanged plan ids.
	ChangedCount int                        `json:"changedCount"`
	Changed      []string                   `json:"changed"`
	Criteria     map[string]*CriterionTally `json:"criteria"`
	// Order keeps the criteria in the order they were first seen.
	Order []string `json:"order"`
}

// CriterionTally accumulates one criterion.
type CriterionTally struct {
	Passed   int     `json:"passed"`
	Failed   int     `json:"failed"`
	Errors   int     `json:"errors"`
	Pending  int     `json:"pending"`
	ScoreSum float64 `json:"scoreSum"`
	Scored   int     `json:"scored"`
}

// Add counts one result.
func (t *Tally) Add(r Result) {
	if r.Error != "" {
		t.Errors++
		return
	}
	t.Graded++
	switch r.Verdict {
	case anticipate.VerdictPass:
		t.Passed++
	case anticipate.VerdictPending:
		t.Pending++
	}
	if r.Score != nil {
		t.ScoreSum += *r.Score
		t.Scored++
	}
	if r.Changed() {
		t.ChangedCount++
		if len(t.Changed) < MaxChanged {
			t.Changed = append(t.Changed, r.PlanID)
		}
	}
	if t.Criteria == nil {
		t.Criteria = map[string]*CriterionTally{}
	}
	for _, c := range r.Criteria {
		ct, ok := t.Criteria[c.CriterionID]
		if !ok {
			ct = &CriterionTally{}
			t.Criteria[c.CriterionID] = ct
			t.Order = append(t.Order, c.CriterionID)
		}
		switch c.Status {
		case anticipate.StatusPass:
			ct.Passed++
		case anticipate.StatusFail:
			ct.Failed++
		case anticipate.StatusErrored:
			ct.Errors++
		default:
			ct.Pending++
		}
		if c.Score != nil {
			ct.ScoreSum += *c.Score
			ct.Scored++
		}
	}
}

// Summary is what GET /v1/evaluations/{id} reports of the results so far.
type Summary struct {
	// PassRate is the share of graded plans whose verdict is PASS (plans
	// that could not be graded are left out and counted in Errors); null
	// before any plan is graded.
	PassRate *float64 `json:"passRate"`
	// MeanScore is the mean of the graded plans' scores.
	MeanScore *float64 `json:"meanScore"`
	Graded    int      `json:"graded"`
	Passed    int      `json:"passed"`
	Pending   int      `json:"pending"`
	Errors    int      `json:"errors"`
	// Changed lists the plans whose verdict changed from their original
	// VERIFY's (the first 1,000; ChangedCount counts them all).
	Changed      []string                    `json:"changed"`
	ChangedCount int                         `json:"changedCount"`
	PerCriterion map[string]CriterionSummary `json:"perCriterion"`
}

// CriterionSummary is one criterion's part of a summary.
type CriterionSummary struct {
	PassRate  *float64 `json:"passRate"`
	MeanScore *float64 `json:"meanScore"`
	Passed    int      `json:"passed"`
	Failed    int      `json:"failed"`
	Errors    int      `json:"errors"`
	Pending   int      `json:"pending"`
}

// Summary reports the tally.
func (t Tally) Summary() Summary {
	s := Summary{Graded: t.Graded, Passed: t.Passed, Pending: t.Pending, Errors: t.Errors,
		Changed: append([]string{}, t.Changed...), ChangedCount: t.ChangedCount, PerCriterion: map[string]CriterionSummary{}}
	s.PassRate = ratio(float64(t.Passed), t.Graded)
	s.MeanScore = ratio(t.ScoreSum, t.Scored)
	ids := append([]string(nil), t.Order...)
	sort.Strings(ids)
	for _, id := range ids {
		c := t.Criteria[id]
		s.PerCriterion[id] = CriterionSummary{PassRate: ratio(float64(c.Passed), c.Passed+c.Failed+c.Errors),
			MeanScore: ratio(c.ScoreSum, c.Scored), Passed: c.Passed, Failed: c.Failed, Errors: c.Errors, Pending: c.Pending}
	}
	return s
}

// ratio is n/d rounded as scores are, nil when d is 0.
func ratio(n float64, d int) *float64 {
	if d == 0 {
		return nil
	}
	p := math.Pow(10, anticipate.ScoreDecimals)
	v := math.Round(n/float64(d)*p) / p
	return &v
}
