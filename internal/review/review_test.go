package review

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
)

var t0 = time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)

func TestParseQueue(t *testing.T) {
	for _, tc := range []struct {
		name, id, body string
		fields         []string
	}{
		{"full", "q1", `{"reviewers":["alice","bob","carol"],"reviewsPerItem":2,"due":"PT4H","resolve":"mean"}`, nil},
		{"defaults", "q1", `{"reviewers":["alice"]}`, nil},
		{"no reviewers", "q1", `{}`, []string{"reviewers"}},
		{"repeated reviewer", "q1", `{"reviewers":["a","a"]}`, []string{"reviewers[1]"}},
		{"empty reviewer", "q1", `{"reviewers":[""]}`, []string{"reviewers[0]"}},
		{"control reviewer", "q1", `{"reviewers":["a\u0007"]}`, []string{"reviewers[0]"}},
		{"more per item than reviewers", "q1", `{"reviewers":["a","b"],"reviewsPerItem":3}`, []string{"reviewsPerItem"}},
		{"zero per item", "q1", `{"reviewers":["a"],"reviewsPerItem":0}`, []string{"reviewsPerItem"}},
		{"bad due", "q1", `{"reviewers":["a"],"due":"4h"}`, []string{"due"}},
		{"due too short", "q1", `{"reviewers":["a"],"due":"PT0.5S"}`, []string{"due"}},
		{"due too long", "q1", `{"reviewers":["a"],"due":"P31D"}`, []string{"due"}},
		{"bad rule", "q1", `{"reviewers":["a"],"resolve":"any"}`, []string{"resolve"}},
		{"bad id", "q/1", `{"reviewers":["a"]}`, []string{"queueId"}},
		{"unknown field", "q1", `{"reviewers":["a"],"x":1}`, []string{"body"}},
		{"trailing value", "q1", `{"reviewers":["a"]} {"x":1}`, []string{"body"}},
		{"reviewer me", "q1", `{"reviewers":["me"]}`, []string{"reviewers[0]"}},
		{"reviewer star", "q1", `{"reviewers":["*"]}`, []string{"reviewers[0]"}},
		{"reviewer blank", "q1", `{"reviewers":[" "]}`, []string{"reviewers[0]"}},
		{"reviewer padded", "q1", `{"reviewers":[" alice"]}`, []string{"reviewers[0]"}},
		{"reviewer bidi override", "q1", `{"reviewers":["ali\u202ece"]}`, []string{"reviewers[0]"}},
		{"reviewer line separator", "q1", `{"reviewers":["ali\u2028ce"]}`, []string{"reviewers[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := ParseQueue(tc.id, []byte(tc.body))
			if got := fieldsOf(err); strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Fatalf("fields %v, want %v (%v)", got, tc.fields, err)
			}
			if err == nil && (q.ReviewsPerItem < 1 || q.Due == "" || q.Resolve == "") {
				t.Fatalf("defaults not applied: %+v", q)
			}
		})
	}
}

func fieldsOf(err error) []string {
	var out []string
	if e, ok := err.(*errs.Error); ok {
		for _, f := range e.Fields {
			out = append(out, f.Path)
		}
	}
	return out
}

func TestAssignRoundRobin(t *testing.T) {
	q := &Queue{Reviewers: []string{"a", "b", "c"}, ReviewsPerItem: 2}
	var got []string
	for range 4 {
		got = append(got, strings.Join(Assign(q), "+"))
	}
	if want := "a+b,c+a,b+c,a+b"; strings.Join(got, ",") != want {
		t.Fatalf("assignments %v, want %s", got, want)
	}
	// The plan's declarer is skipped; the round-robin goes on past it.
	q.Next = 0
	if got := Assign(q, "a"); strings.Join(got, "+") != "b+c" {
		t.Fatalf("with a excluded: %v", got)
	}
	if got := Assign(q, "a", "b"); strings.Join(got, "+") != "c" {
		t.Fatalf("too few eligible: %v", got)
	}
	if got := Assign(q, "a", "b", "c"); len(got) != 0 {
		t.Fatalf("none eligible: %v", got)
	}
}

func item(rule Rule, assignees ...string) *Item {
	return &Item{ItemID: "rvi-1", Assignees: assignees, ReviewsPerItem: len(assignees), Resolve: rule, State: Open,
		Criteria: []Criterion{{CriterionID: "c1", PassingThreshold: 0.7}, {CriterionID: "anti", PassingThreshold: 0.7, Anti: true}}}
}

func review(t *testing.T, it *Item, who, crit, grade string) (bool, error) {
	t.Helper()
	in, g, s, err := ParseReview([]byte(`{"criterionId":"` + crit + `","grade":` + grade + `}`))
	if err != nil {
		t.Fatalf("parse %s: %v", grade, err)
	}
	return it.AddReview(who, in, g, s, t0)
}

func TestAddReviewAndResolve(t *testing.T) {
	for _, tc := range []struct {
		rule      Rule
		grades    [][2]string // per reviewer: c1, anti
		c1        Grade
		anti      Grade
		rationale string
	}{
		{Majority, [][2]string{{`"PASS"`, `"PASS"`}, {`0.8`, `"FAIL"`}, {`"FAIL"`, `"PASS"`}}, Grade{0.9, true}, Grade{1, true}, "3 reviews resolved by majority: a PASS; b 0.8; c FAIL"},
		{Majority, [][2]string{{`"PASS"`, `"PASS"`}, {`"FAIL"`, `0.99`}}, Grade{0, false}, Grade{0.99, false}, ""}, // a tie does not pass
		{AllPass, [][2]string{{`0.9`, `"PASS"`}, {`0.75`, `"PASS"`}}, Grade{0.75, true}, Grade{1, true}, ""},
		{AllPass, [][2]string{{`0.9`, `"PASS"`}, {`0.5`, `"PASS"`}}, Grade{0.5, false}, Grade{1, true}, ""},
		{Mean, [][2]string{{`1`, `"PASS"`}, {`0.4`, `"FAIL"`}}, Grade{0.7, true}, Grade{0.5, false}, ""},
	} {
		names := []string{"a", "b", "c"}[:len(tc.grades)]
		it := item(tc.rule, names...)
		for i, g := range tc.grades {
			for j, crit := range []string{"c1", "anti"} {
				done, err := review(t, it, names[i], crit, g[j])
				if err != nil {
					t.Fatal(err)
				}
				if last := i == len(tc.grades)-1 && j == 1; done != last {
					t.Fatalf("%s: done %v after %s/%s", tc.rule, done, names[i], crit)
				}
			}
		}
		if it.State != Done || it.DoneAt == "" {
			t.Fatalf("%s: state %s", tc.rule, it.State)
		}
		if got := it.Resolved["c1"].Grade; got != tc.c1 {
			t.Errorf("%s %v: c1 %+v, want %+v", tc.rule, tc.grades, got, tc.c1)
		}
		if got := it.Resolved["anti"].Grade; got != tc.anti {
			t.Errorf("%s %v: anti %+v, want %+v", tc.rule, tc.grades, got, tc.anti)
		}
		if tc.rationale != "" && it.Resolved["c1"].Rationale != tc.rationale {
			t.Errorf("rationale %q", it.Resolved["c1"].Rationale)
		}
	}
}

func TestAddReviewRefusals(t *testing.T) {
	it := item(Majority, "a", "b")
	if _, err := review(t, it, "mallory", "c1", `"PASS"`); !errs.Is(err, errs.NotFound) {
		t.Fatalf("not an assignee: %v", err)
	}
	if _, err := review(t, it, "a", "c9", `"PASS"`); strings.Join(fieldsOf(err), ",") != "criterionId" {
		t.Fatalf("unknown criterion: %v", err)
	}
	if _, err := review(t, it, "a", "c1", `"PASS"`); err != nil {
		t.Fatal(err)
	}
	if _, err := review(t, it, "a", "c1", `"FAIL"`); !errs.Is(err, errs.Conflict) {
		t.Fatalf("second review of one criterion: %v", err)
	}
	if len(it.Reviews) != 1 || it.Reviews[0].Grade != "PASS" {
		t.Fatalf("a refused review changed the item: %+v", it.Reviews)
	}
	if p := it.Pending(); strings.Join(p, ",") != "a,b" {
		t.Fatalf("pending %v", p)
	}
	for _, who := range []string{"a", "b"} {
		for _, c := range []string{"c1", "anti"} {
			if who == "a" && c == "c1" {
				continue
			}
			if _, err := review(t, it, who, c, `"PASS"`); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := review(t, it, "a", "c1", `"PASS"`); !errs.Is(err, errs.Conflict) {
		t.Fatalf("review of a done item: %v", err)
	}
}

func TestParseReview(t *testing.T) {
	for body, field := range map[string]string{
		`{"criterionId":"c1","grade":"PASS","comment":"fine"}`:   "",
		`{"criterionId":"c1","grade":0.25}`:                      "",
		`{"criterionId":"c1","grade":"pass"}`:                    "grade",
		`{"criterionId":"c1","grade":1.5}`:                       "grade",
		`{"criterionId":"c1","grade":true}`:                      "grade",
		`{"criterionId":"c1"}`:                                   "grade",
		`{"grade":"PASS"}`:                                       "criterionId",
		`{"criterionId":"c1","grade":"PASS","comment":"\u0000"}`: "comment",
		`{"criterionId":"c1","grade":"PASS","x":1}`:              "body",
		`{"criterionId":"c1","grade":"PASS"} []`:                 "body",
		`[]`:                                                     "body",
	} {
		_, _, _, err := ParseReview([]byte(body))
		if got := strings.Join(fieldsOf(err), ","); got != field {
			t.Errorf("%s: fields %q, want %q (%v)", body, got, field, err)
		}
	}
	long, _ := json.Marshal(map[string]any{"criterionId": "c1", "grade": "PASS", "comment": strings.Repeat("x", MaxCommentLen+1)})
	if _, _, _, err := ParseReview(long); strings.Join(fieldsOf(err), ",") != "comment" {
		t.Errorf("long comment: %v", err)
	}
}

func TestReviewNegativeZeroAndTruncation(t *testing.T) {
	_, g, s, err := ParseReview([]byte(`{"criterionId":"c1","grade":-0}`))
	if err != nil || g != "0" || math.Signbit(s) {
		t.Fatalf("-0 parsed as %q %v (%v)", g, s, err)
	}
	cut := Truncate(strings.Repeat("a", 199)+"éé", 200)
	if !utf8.ValidString(cut) || cut != strings.Repeat("a", 199)+"…" {
		t.Fatalf("truncated %q", cut)
	}
}

func TestItemIDAndSample(t *testing.T) {
	ids := map[string]bool{}
	for _, in := range [][4]string{{"v", "q", Grading, ""}, {"v", "q2", Grading, ""}, {"v2", "q", Grading, ""}, {"v", "q", Calibration, "c"}, {"v", "q", Calibration, "c2"}} {
		ids[ItemID(in[0], in[1], in[2], in[3])] = true
	}
	if len(ids) != 5 || len(ItemID("v", "q", Grading, "")) != len("rvi-")+24 {
		t.Fatalf("item ids are not distinct: %v", ids)
	}
	// Sampling at 0.1 over 10,000 draws lands within 4 standard
	// deviations of 1,000 (sd = 30).
	n := 0
	for i := range 10000 {
		if Sampled("vrf-"+strconv.Itoa(i), "c1", 0.1) {
			n++
		}
	}
	if n < 880 || n > 1120 {
		t.Fatalf("sampled %d of 10000 at 0.1", n)
	}
	if Sampled("v", "c", 0) {
		t.Fatal("a zero rate sampled")
	}
}

func near(p *float64, want float64) bool { return p != nil && math.Abs(*p-want) < 1e-6 }

func TestCohenKappaKnown(t *testing.T) {
	// The textbook table: 20 both yes, 5 yes/no, 10 no/yes, 15 both no:
	// po = 0.7, pe = 0.5, kappa = 0.4.
	var x, y []bool
	add := func(n int, a, b bool) {
		for range n {
			x, y = append(x, a), append(y, b)
		}
	}
	add(20, true, true)
	add(5, true, false)
	add(10, false, true)
	add(15, false, false)
	k, o := CohenKappa(x, y)
	if !near(k, 0.4) || !near(o, 0.7) {
		t.Fatalf("kappa %v observed %v", deref(k), deref(o))
	}
	if k, _ := CohenKappa([]bool{true, true}, []bool{true, true}); k != nil {
		t.Fatalf("kappa of unanimous labels is %v, want undefined", *k)
	}
}

func TestFleissKappaKnown(t *testing.T) {
	// 4 items, 3 raters, PASS counts 3, 0, 2, 1: P = (1+1+1/3+1/3)/4 =
	// 2/3, pj = 0.5, pe = 0.5, kappa = 1/3.
	items := [][]bool{{true, true, true}, {false, false, false}, {true, true, false}, {true, false, false}}
	k, o := FleissKappa(items)
	if !near(k, 0.333333) || !near(o, 0.666667) {
		t.Fatalf("kappa %v observed %v", deref(k), deref(o))
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestMeasure(t *testing.T) {
	mk := func(labels []bool, judge *Grade) Item {
		it := Item{State: Done, Criteria: []Criterion{{CriterionID: "c1", Judge: judge}}, Resolved: map[string]Resolution{}}
		pass := 0
		for i, l := range labels {
			name := string(rune('a' + i))
			it.Assignees = append(it.Assignees, name)
			it.Reviews = append(it.Reviews, Review{Reviewer: name, CriterionID: "c1", Pass: l})
			if l {
				pass++
			}
		}
		it.Resolved["c1"] = Resolution{Grade: Grade{Pass: pass*2 > len(labels)}}
		return it
	}
	items := []Item{mk([]bool{true, true}, &Grade{1, true}), mk([]bool{true, false}, &Grade{1, true}),
		mk([]bool{false, false}, &Grade{0, false}), mk([]bool{false, false}, &Grade{1, true}), mk([]bool{true}, nil), {State: Open}}
	ag := Measure(items, 2)
	if len(ag) != 1 || ag[0].Method != "cohen" || ag[0].Items != 4 || ag[0].Skipped != 1 {
		t.Fatalf("agreement %+v", ag)
	}
	// Pairs (T,T) (T,F) (F,F) (F,F): po 0.75, px 0.5, py 0.25, pe 0.5,
	// kappa 0.5.
	if !near(ag[0].Kappa, 0.5) || !near(ag[0].Observed, 0.75) {
		t.Fatalf("kappa %v observed %v", deref(ag[0].Kappa), deref(ag[0].Observed))
	}
	// Judge T,T,F,T vs resolved T,F,F,F: po 0.5, pj 0.75, ph 0.25, pe
	// 0.375, kappa 0.2.
	if j := ag[0].Judge; j == nil || j.Items != 4 || !near(j.Kappa, 0.2) {
		t.Fatalf("judge agreement %+v", j)
	}
}
