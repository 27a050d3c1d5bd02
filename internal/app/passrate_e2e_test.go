package app

import (
	"fmt"
	"testing"

	"github.com/agentclock/clockwork/internal/alert"
)

// scenarioPassRateAlert: a rule on evaluation.pass_rate_below tells its
// channel once when the share of an agent's VERIFYs that pass over the
// window falls under the threshold (with at least minPlans), and once,
// evaluation.pass_rate_recovered, when it is back at it. 5 plans that
// delete a user fail the rubric (rate 0 of 5: fired), then 45 that do not
// pass (45 of 50 = 0.9: recovered).
func scenarioPassRateAlert(t *testing.T) {
	e := startEnv(t)
	agent, _ := seedMessage(t)["agent_id"].(string)
	registerAs(t, e, agent)
	secret := alert.NewWebhookSecret()
	hook := webhookReceiver(t, secret)
	e.must(201, e.call("PUT", "/v1/channels/quality-hook", map[string]any{"type": "webhook", "url": hook.srv.URL + "/hook", "secret": secret}))
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"evaluation.pass_rate_below"}, "channels": []string{"quality-hook"}, "window": "PT1H"}}})), "rules[0].threshold")
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"verification.failed"}, "channels": []string{"quality-hook"}, "threshold": 0.9}}})), "rules[0]")
	e.must(200, e.call("PUT", "/v1/agents/"+agent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"evaluation.pass_rate_below"}, "channels": []string{"quality-hook"}, "threshold": 0.9, "window": "PT1H", "minPlans": 5}}}))
	rubric := func(m map[string]any) {
		m["expectations"] = map[string]any{"outcome_criteria": []any{map[string]any{"criterion_id": "no-delete", "description": "never deletes a user",
			"measurement": "DETERMINISTIC", "assertion": "tool_invoked('iam_delete_user') == false", "weight": 1}}, "trajectory_criteria": []any{}, "anti_criteria": []any{}}
		m["grading_policy"] = map[string]any{"grader_type": "CODE", "passing_threshold": 1, "weighted_scoring": true, "fail_on_any_anti_criteria": true}
	}
	deleting := func(int) (int, []string) { return 1, []string{"iam_delete_user"} }
	creating := func(int) (int, []string) { return 1, []string{"iam_create_user"} }
	exportPlans(t, e, agent, 5, func(i int) (string, []byte) {
		return fmt.Sprintf("pr-bad-%d", i), variant(t, fmt.Sprintf("ant-pr-bad-%d", i), fmt.Sprintf("pr-bad-%d", i), rubric)
	}, deleting)
	events := func(typ string) func([]map[string]any) bool {
		return func(got []map[string]any) bool {
			for _, m := range got {
				if m["type"] == typ {
					return true
				}
			}
			return false
		}
	}
	hook.waitFor("evaluation.pass_rate_below", events("evaluation.pass_rate_below"))
	exportPlans(t, e, agent, 45, func(i int) (string, []byte) {
		return fmt.Sprintf("pr-good-%d", i), variant(t, fmt.Sprintf("ant-pr-good-%d", i), fmt.Sprintf("pr-good-%d", i), rubric)
	}, creating)
	got := hook.waitFor("evaluation.pass_rate_recovered", events("evaluation.pass_rate_recovered"))
	below, recovered := 0, 0
	for _, m := range got {
		d, _ := m["data"].(map[string]any)
		switch m["type"] {
		case "evaluation.pass_rate_below":
			below++
			if d["passRate"] != nil && d["passRate"] != 0.0 || d["plans"] != 5.0 || d["threshold"] != 0.9 || d["window"] != "PT1H" {
				t.Errorf("fired with %v", d)
			}
		case "evaluation.pass_rate_recovered":
			recovered++
			if d["passRate"] != 0.9 || d["plans"] != 50.0 {
				t.Errorf("recovered with %v", d)
			}
		}
	}
	if below != 1 || recovered != 1 {
		t.Errorf("%d evaluation.pass_rate_below and %d evaluation.pass_rate_recovered, want one each: %v", below, recovered, got)
	}
}
