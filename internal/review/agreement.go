package review

import "math"

// Agreement is how well a queue's reviewers agree on one criterion, and,
// for a criterion the judge grades, how well the judge agrees with them.
// Labels are PASS and FAIL, as each review's score grades under the
// criterion's threshold.
type Agreement struct {
	CriterionID string `json:"criterionId"`
	// Method is "cohen" (two reviews per item), "fleiss" (more), or ""
	// when the items have one review each.
	Method string `json:"method,omitempty"`
	// Kappa is null when undefined: fewer than two items, or every
	// review giving the same label (no variation to agree on).
	Kappa *float64 `json:"kappa"`
	// Observed is the share of agreeing pairs of reviews.
	Observed *float64 `json:"observed"`
	// Items counts the done items measured; Skipped those left out
	// because their number of reviews differs from the queue's.
	Items   int `json:"items"`
	Skipped int `json:"skipped,omitempty"`
	// Judge compares the judge's grade with the reviews' resolved grade
	// on calibration items.
	Judge *JudgeAgreement `json:"judge,omitempty"`
}

// JudgeAgreement is Cohen's kappa between the judge and the people.
type JudgeAgreement struct {
	Kappa    *float64 `json:"kappa"`
	Observed *float64 `json:"observed"`
	Items    int      `json:"items"`
}

// Measure computes the agreement on each criterion over done items, with
// reviewsPerItem the queue's number of reviews per item: items reviewed a
// different number of times are skipped (kappa compares like with like).
// Criteria are reported in the order first seen.
func Measure(items []Item, reviewsPerItem int) []Agreement {
	var order []string
	type acc struct {
		labels  [][]bool // per item, the reviews' labels in assignment order
		judge   [][2]bool
		skipped int
	}
	by := map[string]*acc{}
	get := func(id string) *acc {
		a, ok := by[id]
		if !ok {
			a = &acc{}
			by[id] = a
			order = append(order, id)
		}
		return a
	}
	for i := range items {
		it := &items[i]
		if it.State != Done {
			continue
		}
		for ci := range it.Criteria {
			c := &it.Criteria[ci]
			a := get(c.CriterionID)
			rs := it.ReviewsOf(c.CriterionID)
			if c.Judge != nil {
				if res, ok := it.Resolved[c.CriterionID]; ok {
					a.judge = append(a.judge, [2]bool{c.Judge.Pass, res.Pass})
				}
			}
			if len(rs) != reviewsPerItem {
				a.skipped++
				continue
			}
			labels := make([]bool, len(rs))
			for j, r := range rs {
				labels[j] = r.Pass
			}
			a.labels = append(a.labels, labels)
		}
	}
	out := make([]Agreement, 0, len(order))
	for _, id := range order {
		a := by[id]
		ag := Agreement{CriterionID: id, Items: len(a.labels), Skipped: a.skipped}
		switch {
		case reviewsPerItem == 2:
			ag.Method = "cohen"
			x, y := make([]bool, len(a.labels)), make([]bool, len(a.labels))
			for i, l := range a.labels {
				x[i], y[i] = l[0], l[1]
			}
			ag.Kappa, ag.Observed = CohenKappa(x, y)
		case reviewsPerItem > 2:
			ag.Method = "fleiss"
			ag.Kappa, ag.Observed = FleissKappa(a.labels)
		}
		if len(a.judge) > 0 {
			x, y := make([]bool, len(a.judge)), make([]bool, len(a.judge))
			for i, p := range a.judge {
				x[i], y[i] = p[0], p[1]
			}
			k, o := CohenKappa(x, y)
			ag.Judge = &JudgeAgreement{Kappa: k, Observed: o, Items: len(a.judge)}
		}
		out = append(out, ag)
	}
	return out
}

// CohenKappa returns Cohen's kappa and the observed agreement of two
// raters' binary labels of the same items (x[i] and y[i] label item i):
// (po - pe) / (1 - pe), with pe from each rater's own label frequencies.
// Kappa is nil when undefined (pe is 1, or no items); observed is nil
// with no items.
func CohenKappa(x, y []bool) (kappa, observed *float64) {
	n := len(x)
	if n == 0 || len(y) != n {
		return nil, nil
	}
	agree, xp, yp := 0, 0, 0
	for i := range x {
		if x[i] == y[i] {
			agree++
		}
		if x[i] {
			xp++
		}
		if y[i] {
			yp++
		}
	}
	fn := float64(n)
	po := float64(agree) / fn
	pe := (float64(xp)/fn)*(float64(yp)/fn) + (1-float64(xp)/fn)*(1-float64(yp)/fn)
	observed = ptr(round(po))
	if pe >= 1 {
		return nil, observed
	}
	return ptr(round((po - pe) / (1 - pe))), observed
}

// FleissKappa returns Fleiss' kappa and the mean observed agreement of
// items each labelled by the same number (two or more) of raters, who
// need not be the same people. Kappa is nil when undefined.
func FleissKappa(items [][]bool) (kappa, observed *float64) {
	if len(items) == 0 {
		return nil, nil
	}
	m := len(items[0])
	if m < 2 {
		return nil, nil
	}
	sumP, pass := 0.0, 0
	for _, labels := range items {
		if len(labels) != m {
			return nil, nil
		}
		k := 0
		for _, l := range labels {
			if l {
				k++
			}
		}
		pass += k
		// P_i: the share of agreeing ordered pairs of raters.
		sumP += float64(k*(k-1)+(m-k)*(m-k-1)) / float64(m*(m-1))
	}
	n := float64(len(items))
	pbar := sumP / n
	pj := float64(pass) / (n * float64(m))
	pe := pj*pj + (1-pj)*(1-pj)
	observed = ptr(round(pbar))
	if pe >= 1 || math.IsNaN(pe) {
		return nil, observed
	}
	return ptr(round((pbar - pe) / (1 - pe))), observed
}

func ptr(f float64) *float64 { return &f }
