package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/metrics"
)

// TestMetricsDashboard: each stage's dashboard (the service's, named like
// the stack) draws every clockwork_ metric of the catalogue in the
// namespace the functions write to (METRICS_NAMESPACE).
func TestMetricsDashboard(t *testing.T) {
	for stage, sy := range synth(t) {
		t.Run(stage, func(t *testing.T) {
			_, d := only(t, sy.json, "AWS::CloudWatch::Dashboard", "DashboardName", sy.cfg.Name)
			// The body is a Fn::Join of strings and the stack's tokens
			// (region); its text is what CloudWatch receives.
			raw, err := json.Marshal(props(d)["DashboardBody"])
			if err != nil {
				t.Fatal(err)
			}
			var body strings.Builder
			var walk func(v any)
			walk = func(v any) {
				switch x := v.(type) {
				case string:
					body.WriteString(x)
				case []any:
					for _, e := range x {
						walk(e)
					}
				case map[string]any:
					if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
						walk(j[1])
					}
				}
			}
			var v any
			_ = json.Unmarshal(raw, &v)
			walk(v)
			text := body.String()
			ns := "Clockwork/clockwork-" + stage
			if MetricsNamespace(sy.cfg) != ns {
				t.Fatalf("namespace %q, want %q", MetricsNamespace(sy.cfg), ns)
			}
			drawn := 0
			for _, m := range metrics.All() {
				if m.EmbeddedOnly {
					continue
				}
				drawn++
				if !strings.Contains(text, m.Name) {
					t.Errorf("the dashboard does not draw %s", m.Name)
				}
			}
			if strings.Count(text, ns) < drawn {
				t.Errorf("the dashboard does not read the namespace %s", ns)
			}
			// The metric widgets come in the service's dashboard, not
			// in one of their own.
			if n := len(resources(sy.json, "AWS::CloudWatch::Dashboard")); n != 1 {
				t.Errorf("%d dashboards, want the service's one", n)
			}
		})
	}
}
