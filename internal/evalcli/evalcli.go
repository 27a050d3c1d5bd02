// Package evalcli is `clockwork eval`: it starts an evaluation (re-grading
// stored executions against criteria given now, POST /v1/evaluations),
// waits for it, prints its results as a table and exits non-zero when the
// pass rate is under the bar, so that a CI job fails the build when a
// changed rubric or judge model makes the agent's past runs fail.
package evalcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentclock/clockwork/client"
)

// Exit codes.
const (
	ExitPass  = 0 // the pass rate reaches the bar
	ExitFail  = 1 // under the bar, no plan graded, or the evaluation failed
	ExitError = 2 // bad flags or files, or the server refused or could not be reached
)

// Usage is the command's help.
const Usage = `usage: clockwork eval [flags]

Re-grades an agent's stored executions against criteria given now
(POST /v1/evaluations), waits for the result, prints a table and exits
1 when the pass rate is under --fail-under.

  clockwork eval --server https://clockwork.example.com --filter agentId=agent-1,from=2026-12-01T00:00:00Z \
      --criteria criteria.json --fail-under 0.9

flags:
`

// Run runs the command with args (after "eval") and returns its exit
// code. getenv reads CLOCKWORK_URL and CLOCKWORK_TOKEN.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("clockwork eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage); fs.PrintDefaults() }
	server := fs.String("server", or(getenv("CLOCKWORK_URL"), "http://127.0.0.1:8080"), "the clockwork server (default $CLOCKWORK_URL)")
	token := fs.String("token", getenv("CLOCKWORK_TOKEN"), "bearer token with grades:write and read (default $CLOCKWORK_TOKEN)")
	filter := fs.String("filter", "", "the plans: agentId=…,from=RFC3339,to=RFC3339,planIds=p1|p2 (or @file.json holding the filter object)")
	criteriaFile := fs.String("criteria", "", "a JSON file: an array of criteria as an ANTICIPATE declares them (each with an optional category), or an object {criteria, gradingPolicy, judge}")
	policyFile := fs.String("policy", "", "a JSON file holding an RFC-032 grading_policy (default: each plan's own)")
	judgeModel := fs.String("judge-model", "", "grade HEURISTIC criteria with this model of the server's judge")
	failUnder := fs.Float64("fail-under", 0, "exit 1 when the pass rate is under this (0 to 1)")
	maxErrors := fs.Int("max-errors", 0, "exit 1 when more plans than this could not be graded (erased since, no grading policy)")
	timeout := fs.Duration("timeout", 30*time.Minute, "how long to wait for the evaluation")
	poll := fs.Duration("poll", 2*time.Second, "how often to read its progress")
	asJSON := fs.Bool("json", false, "print the evaluation as JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitPass
		}
		return ExitError
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "clockwork eval: "+format+"\n", a...)
		return ExitError
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if *failUnder < 0 || *failUnder > 1 || math.IsNaN(*failUnder) {
		return usage("--fail-under must be between 0 and 1")
	}
	if *maxErrors < 0 {
		return usage("--max-errors must not be negative")
	}
	if *poll <= 0 || *timeout <= 0 {
		return usage("--poll and --timeout must be positive")
	}
	req, err := request(*filter, *criteriaFile, *policyFile, *judgeModel)
	if err != nil {
		return usage("%v", err)
	}
	c, err := client.New(*server, client.Options{Token: *token, UserAgent: "clockwork-eval"})
	if err != nil {
		return usage("--server: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	ev, err := c.StartEvaluation(ctx, req)
	if err != nil {
		fmt.Fprintf(stderr, "clockwork eval: starting the evaluation: %v\n", err)
		return ExitError
	}
	fmt.Fprintf(stderr, "evaluation %s: %d plans\n", ev.EvaluationID, ev.Progress.Total)
	for ev.State == "running" {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "clockwork eval: %s still running after %s (%d of %d plans)\n", ev.EvaluationID, *timeout, ev.Progress.Done, ev.Progress.Total)
			return ExitError
		case <-time.After(*poll):
		}
		next, err := c.Evaluation(ctx, ev.EvaluationID, 1, "")
		if err != nil {
			fmt.Fprintf(stderr, "clockwork eval: reading %s: %v\n", ev.EvaluationID, err)
			return ExitError
		}
		ev = next
	}
	results, err := allResults(ctx, c, ev.EvaluationID)
	if err != nil {
		fmt.Fprintf(stderr, "clockwork eval: reading the results: %v\n", err)
		return ExitError
	}
	ev.Results = results
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(ev)
	} else {
		printTable(stdout, ev)
	}
	return verdict(stderr, ev, *failUnder, *maxErrors)
}

// verdict prints whether the evaluation passed the bar and returns the
// exit code.
func verdict(w io.Writer, ev *client.Evaluation, bar float64, maxErrors int) int {
	s := ev.Summary
	switch {
	case ev.State == "failed":
		fmt.Fprintf(w, "FAIL: the evaluation failed: %s\n", ev.Error)
		return ExitFail
	case s.Errors > maxErrors:
		// The pass rate leaves them out: a rubric that cannot grade most
		// plans must not pass on the few it could.
		fmt.Fprintf(w, "FAIL: %d of %d plans could not be graded (--max-errors %d)\n", s.Errors, ev.Progress.Total, maxErrors)
		return ExitFail
	case s.PassRate == nil:
		fmt.Fprintf(w, "FAIL: no plan was graded (%d matched, %d could not be graded)\n", ev.Progress.Total, s.Errors)
		return ExitFail
	case *s.PassRate < bar:
		fmt.Fprintf(w, "FAIL: pass rate %.4g is under %.4g\n", *s.PassRate, bar)
		return ExitFail
	}
	fmt.Fprintf(w, "PASS: pass rate %.4g (bar %.4g)\n", *s.PassRate, bar)
	return ExitPass
}

func allResults(ctx context.Context, c *client.Client, id string) ([]client.EvaluationResult, error) {
	var out []client.EvaluationResult
	token := ""
	for {
		page, err := c.Evaluation(ctx, id, 100, token)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Results...)
		if token = page.NextToken; token == "" {
			return out, nil
		}
	}
}

// printTable writes one row per plan and the summary.
func printTable(w io.Writer, ev *client.Evaluation) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tAGENT\tWAS\tNOW\tSCORE\tCHANGED")
	for _, r := range ev.Results {
		now, score := r.Verdict, "-"
		if r.Error != "" {
			now = "ERROR: " + r.Error
		}
		if r.Score != nil {
			score = fmt.Sprintf("%.3f", *r.Score)
		}
		changed := ""
		if r.Verdict != "" && r.OriginalVerdict != "" && r.Verdict != r.OriginalVerdict {
			changed = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.PlanID, r.AgentID, or(r.OriginalVerdict, "-"), now, score, changed)
	}
	tw.Flush()
	s := ev.Summary
	fmt.Fprintf(w, "\n%d plans: %d graded, %d passed, %d pending, %d not graded; pass rate %s, mean score %s; %d changed verdict\n",
		ev.Progress.Total, s.Graded, s.Passed, s.Pending, s.Errors, num(s.PassRate), num(s.MeanScore), s.ChangedCount)
	ids := make([]string, 0, len(s.PerCriterion))
	for id := range s.PerCriterion {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CRITERION\tPASS RATE\tMEAN SCORE\tPASS\tFAIL\tERROR\tPENDING")
	for _, id := range ids {
		c := s.PerCriterion[id]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", id, num(c.PassRate), num(c.MeanScore), c.Passed, c.Failed, c.Errors, c.Pending)
	}
	tw.Flush()
}

func num(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("%.4g", *f)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// request builds the evaluation request from the flags.
func request(filter, criteriaFile, policyFile, judgeModel string) (client.EvaluationRequest, error) {
	var req client.EvaluationRequest
	if criteriaFile == "" {
		return req, fmt.Errorf("--criteria is required")
	}
	raw, err := os.ReadFile(criteriaFile)
	if err != nil {
		return req, fmt.Errorf("--criteria: %w", err)
	}
	if trimmed := strings.TrimSpace(string(raw)); strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal(raw, &req.Criteria); err != nil {
			return req, fmt.Errorf("--criteria %s: %w", criteriaFile, err)
		}
	} else {
		var whole client.EvaluationRequest
		if err := json.Unmarshal(raw, &whole); err != nil {
			return req, fmt.Errorf("--criteria %s: not a JSON array of criteria nor an object with criteria: %w", criteriaFile, err)
		}
		req.Criteria, req.GradingPolicy, req.Judge = whole.Criteria, whole.GradingPolicy, whole.Judge
	}
	if len(req.Criteria) == 0 {
		return req, fmt.Errorf("--criteria %s holds no criteria", criteriaFile)
	}
	if policyFile != "" {
		b, err := os.ReadFile(policyFile)
		if err != nil {
			return req, fmt.Errorf("--policy: %w", err)
		}
		req.GradingPolicy = &client.GradingPolicy{}
		if err := json.Unmarshal(b, req.GradingPolicy); err != nil {
			return req, fmt.Errorf("--policy %s: %w", policyFile, err)
		}
	}
	if judgeModel != "" {
		req.Judge = &client.EvaluationJudge{Model: judgeModel}
	}
	if req.Filter, err = parseFilter(filter); err != nil {
		return req, err
	}
	return req, nil
}

// parseFilter reads --filter: key=value pairs, or @file.json.
func parseFilter(s string) (client.EvaluationFilter, error) {
	var f client.EvaluationFilter
	if s == "" {
		return f, fmt.Errorf("--filter is required (agentId=…, or planIds=p1|p2)")
	}
	if name, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return f, fmt.Errorf("--filter: %w", err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return f, fmt.Errorf("--filter %s: %w", name, err)
		}
		return f, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || v == "" {
			return f, fmt.Errorf("--filter: %q is not key=value", part)
		}
		switch k {
		case "agentId":
			f.AgentID = v
		case "from":
			f.From = v
		case "to":
			f.To = v
		case "planIds":
			f.PlanIDs = strings.Split(v, "|")
		default:
			return f, fmt.Errorf("--filter: unknown key %q (agentId, from, to, planIds)", k)
		}
	}
	return f, nil
}
