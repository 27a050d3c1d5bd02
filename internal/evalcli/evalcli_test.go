package evalcli

import (
	"io"
	"testing"

	"github.com/agentclock/clockwork/client"
)

func TestVerdict(t *testing.T) {
	rate := func(f float64) *float64 { return &f }
	for _, c := range []struct {
		name      string
		ev        client.Evaluation
		bar       float64
		maxErrors int
		want      int
	}{
		{"over the bar", client.Evaluation{State: "done", Summary: client.EvaluationSummary{PassRate: rate(0.95), Graded: 20}}, 0.9, 0, ExitPass},
		{"at the bar", client.Evaluation{State: "done", Summary: client.EvaluationSummary{PassRate: rate(0.9), Graded: 20}}, 0.9, 0, ExitPass},
		{"under the bar", client.Evaluation{State: "done", Summary: client.EvaluationSummary{PassRate: rate(0.85), Graded: 20}}, 0.9, 0, ExitFail},
		{"nothing graded", client.Evaluation{State: "done"}, 0, 0, ExitFail},
		{"plans not graded", client.Evaluation{State: "done", Progress: client.EvaluationProgress{Total: 1000}, Summary: client.EvaluationSummary{PassRate: rate(1), Graded: 1, Errors: 999}}, 0.9, 0, ExitFail},
		{"errors allowed", client.Evaluation{State: "done", Summary: client.EvaluationSummary{PassRate: rate(1), Graded: 9, Errors: 1}}, 0.9, 1, ExitPass},
		{"failed job", client.Evaluation{State: "failed", Error: "boom", Summary: client.EvaluationSummary{PassRate: rate(1)}}, 0, 0, ExitFail},
	} {
		if got := verdict(io.Discard, &c.ev, c.bar, c.maxErrors); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}

func TestParseFilter(t *testing.T) {
	f, err := parseFilter("agentId=a1,from=2026-12-01T00:00:00Z,planIds=p1|p2")
	if err != nil || f.AgentID != "a1" || f.From != "2026-12-01T00:00:00Z" || len(f.PlanIDs) != 2 {
		t.Fatalf("%+v %v", f, err)
	}
	for _, bad := range []string{"", "agentId", "colour=red", "agentId="} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	env := func(string) string { return "" }
	for _, args := range [][]string{{"--fail-under", "2"}, {"--max-errors", "-1"}, {"--criteria", "/nonexistent"}, {"stray"}} {
		if got := Run(t.Context(), args, io.Discard, io.Discard, env); got != ExitError {
			t.Errorf("%v: exit %d, want %d", args, got, ExitError)
		}
	}
}
