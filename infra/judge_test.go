package main

import (
	"fmt"
	"strings"
	"testing"
)

// The model judge is called by the grader function alone: it alone gets
// the judge's settings and grants, and only when a judge is configured;
// the stream function, which runs VERIFY, is told (MODEL_GRADING) that
// HEURISTIC criteria wait for it.
// Bedrock: bedrock:InvokeModel on that model's ARN only. OpenAI: the base
// URL and model, and ssm:GetParameter on the key's parameter only.
func TestJudgeGrants(t *testing.T) {
	envOf := func(t *testing.T, tj map[string]any, name string) map[string]any {
		_, fn := only(t, tj, "AWS::Lambda::Function", "FunctionName", name)
		env, _ := props(fn)["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		return vars
	}
	judgeActions := []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream", "bedrock:*"}

	// Without a judge: no setting and no grant anywhere.
	for stage, sy := range synth(t) {
		if v := envOf(t, sy.json, "clockwork-"+stage+"-stream")["MODEL_GRADING"]; v != nil {
			t.Errorf("%s stream has MODEL_GRADING=%v without a judge configured", stage, v)
		}
		for _, name := range Functions {
			vars := envOf(t, sy.json, "clockwork-"+stage+"-"+name)
			for k := range vars {
				if strings.HasPrefix(k, "JUDGE_") {
					t.Errorf("%s %s has %s without a judge configured", stage, name, k)
				}
			}
			acts := actionsOf(statementsOfRole(sy.json, roleOfFunction(t, sy.json, "clockwork-"+stage+"-"+name)))
			for _, a := range judgeActions {
				if acts[a] != nil {
					t.Errorf("%s %s has %s without a judge configured", stage, name, a)
				}
			}
		}
	}

	judges := synthJudges(t)
	for kind, sy := range judges {
		if v := envOf(t, sy.json, sy.cfg.Name+"-stream")["MODEL_GRADING"]; v != "true" {
			t.Errorf("%s judge: the stream function's MODEL_GRADING is %v, want true (VERIFY leaves HEURISTIC criteria to the grader)", kind, v)
		}
		if v := envOf(t, sy.json, sy.cfg.Name+"-api")["MODEL_GRADING"]; v != "true" {
			t.Errorf("%s judge: the API function's MODEL_GRADING is %v, want true (an evaluation may name another model)", kind, v)
		}
	}
	t.Run("bedrock", func(t *testing.T) {
		sy := judges["bedrock"]
		for _, name := range Functions {
			fn := sy.cfg.Name + "-" + name
			vars := envOf(t, sy.json, fn)
			acts := actionsOf(statementsOfRole(sy.json, roleOfFunction(t, sy.json, fn)))
			if name != "grader" {
				if vars["JUDGE_KIND"] != nil || acts["bedrock:InvokeModel"] != nil {
					t.Errorf("%s has the judge's settings or grant: %v %v", name, vars["JUDGE_KIND"], acts["bedrock:InvokeModel"])
				}
				continue
			}
			if vars["JUDGE_KIND"] != "bedrock" || vars["JUDGE_MODEL"] != sy.cfg.JudgeModel {
				t.Errorf("grader function judge settings %v %v", vars["JUDGE_KIND"], vars["JUDGE_MODEL"])
			}
			res := acts["bedrock:InvokeModel"]
			if len(res) != 1 || !strings.Contains(fmt.Sprint(res[0]), ":bedrock:") ||
				!strings.Contains(fmt.Sprint(res[0]), "::foundation-model/"+sy.cfg.JudgeModel) {
				t.Errorf("grader function bedrock:InvokeModel on %v, want the model's foundation-model ARN only", res)
			}
			for a := range acts {
				if strings.HasPrefix(a, "bedrock:") && a != "bedrock:InvokeModel" {
					t.Errorf("grader function has %s", a)
				}
			}
		}
	})
	t.Run("openai", func(t *testing.T) {
		sy := judges["openai"]
		for _, name := range Functions {
			fn := sy.cfg.Name + "-" + name
			vars := envOf(t, sy.json, fn)
			acts := actionsOf(statementsOfRole(sy.json, roleOfFunction(t, sy.json, fn)))
			keyReads := strings.Contains(fmt.Sprint(acts["ssm:GetParameter"]), "parameter/clockwork/judge/openai-key")
			if name != "grader" {
				if vars["JUDGE_KIND"] != nil || keyReads {
					t.Errorf("%s has the judge's settings or key", name)
				}
				continue
			}
			if vars["JUDGE_KIND"] != "openai" || vars["JUDGE_URL"] != sy.cfg.JudgeURL || vars["JUDGE_MODEL"] != sy.cfg.JudgeModel ||
				vars["JUDGE_API_KEY_PARAMETER"] != sy.cfg.JudgeAPIKeyParameter || vars["JUDGE_API_KEY"] != nil {
				t.Errorf("grader function judge settings %v", vars)
			}
			if len(acts["ssm:GetParameter"]) != 1 || !keyReads {
				t.Errorf("grader function ssm:GetParameter on %v, want the key's parameter only", acts["ssm:GetParameter"])
			}
			if acts["bedrock:InvokeModel"] != nil {
				t.Errorf("an openai judge's grader function has bedrock:InvokeModel")
			}
		}
	})
}

// A judge configuration the stream function could not build fails synth,
// naming the context key.
func TestJudgeContext(t *testing.T) {
	ctx := func(m map[string]any) func(string) (any, bool) {
		return func(k string) (any, bool) { v, ok := m[k]; return v, ok }
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"judgeKind": "bedrock"}, "judgeModel"},
		{map[string]any{"judgeKind": "openai", "judgeModel": "m"}, "judgeUrl"},
		{map[string]any{"judgeKind": "openai", "judgeModel": "m", "judgeUrl": "http://plain.example/v1"}, "https"},
		{map[string]any{"judgeKind": "openai", "judgeModel": "m", "judgeUrl": "https://x/v1", "judgeApiKeyParameter": "key"}, "judgeApiKeyParameter"},
		{map[string]any{"judgeKind": "gemini"}, "judgeKind"},
		{map[string]any{"judgeModel": "m"}, "judgeKind"},
		{map[string]any{"judgeKind": "bedrock", "judgeModel": "m", "judgeUrl": "https://x"}, "judgeUrl"},
	} {
		if _, err := ConfigFromContext(ctx(c.m)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %s", c.m, err, c.want)
		}
	}
	c, err := ConfigFromContext(ctx(map[string]any{"judgeKind": "bedrock", "judgeModel": "amazon.nova-micro-v1:0"}))
	if err != nil || c.JudgeKind != "bedrock" || c.BedrockModelARN("aws", "us-east-1") != "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-micro-v1:0" {
		t.Fatalf("%+v %v", c, err)
	}
	arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0"
	if c.JudgeModel = arn; c.BedrockModelARN("aws", "us-east-1") != arn {
		t.Fatalf("an ARN is granted as given")
	}
}

// TestMCPAllowedOrigins: the context value mcpAllowedOrigins reaches the
// API function alone as MCP_ALLOWED_ORIGINS; without it no function has
// it (the API then refuses every browser Origin at /mcp); a value that is
// not a list of origins is refused naming the key.
func TestMCPAllowedOrigins(t *testing.T) {
	for _, bad := range []string{"console.example.com", "https://console.example.com/app", "ftp://x", "https://a.example, https://b.example/?q"} {
		if _, err := ConfigFromContext(ctx(map[string]any{"mcpAllowedOrigins": bad})); err == nil || !strings.Contains(err.Error(), "context mcpAllowedOrigins") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	c, err := ConfigFromContext(ctx(map[string]any{"mcpAllowedOrigins": "https://a.example, http://localhost:6274"}))
	if err != nil || c.MCPAllowedOrigins != "https://a.example,http://localhost:6274" {
		t.Fatalf("%q %v", c.MCPAllowedOrigins, err)
	}
	envOf := func(tj map[string]any, name string) map[string]any {
		_, fn := only(t, tj, "AWS::Lambda::Function", "FunctionName", name)
		env, _ := props(fn)["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		return vars
	}
	for stage, sy := range synth(t) {
		for _, name := range Functions {
			if v, ok := envOf(sy.json, "clockwork-"+stage+"-"+name)["MCP_ALLOWED_ORIGINS"]; ok {
				t.Errorf("%s %s has MCP_ALLOWED_ORIGINS %v without it configured", stage, name, v)
			}
		}
	}
	sy := synthJudges(t)["openai"]
	for _, name := range Functions {
		v, ok := envOf(sy.json, sy.cfg.Name+"-"+name)["MCP_ALLOWED_ORIGINS"]
		if (name == "api") != ok || (ok && v != "https://console.example.com") {
			t.Errorf("%s: MCP_ALLOWED_ORIGINS %v (set: %v)", name, v, ok)
		}
	}
}

// TestAlertsContext: the alert settings are read from context and refused
// naming the key; staging (testConfig) deploys with them, its api and
// clock functions alone holding SES_FROM and EVENTBRIDGE_ALERTS.
func TestAlertsContext(t *testing.T) {
	ctx := func(m map[string]any) func(string) (any, bool) {
		return func(k string) (any, bool) { v, ok := m[k]; return v, ok }
	}
	for _, c := range []struct {
		m    map[string]any
		want string
	}{
		{map[string]any{"sesFrom": "Ops <ops@example.com>"}, "sesFrom"},
		{map[string]any{"alertEventBuses": "a b"}, "alertEventBuses"},
		{map[string]any{"publicUrl": "http://x.example"}, "publicUrl"},
	} {
		if _, err := ConfigFromContext(ctx(c.m)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %s", c.m, err, c.want)
		}
	}
	c, err := ConfigFromContext(ctx(map[string]any{"sesFrom": "ops@example.com", "alertEventBuses": "default, ops", "publicUrl": "https://cw.example.com"}))
	if err != nil || c.SESFrom != "ops@example.com" || c.AlertEventBuses != "default,ops" || c.PublicURL != "https://cw.example.com" {
		t.Fatalf("%+v %v", c, err)
	}
	sy := synth(t)["staging"]
	for _, fn := range []string{"api", "clock", "stream", "grader"} {
		env := (&templateView{tj: sy.json, fns: map[string]string{}}).envOf(sy.cfg.Name, fn)
		want := fn == "api" || fn == "clock"
		if (env["SES_FROM"] != nil) != want || (env["EVENTBRIDGE_ALERTS"] != nil) != want {
			t.Errorf("%s function: SES_FROM %v, EVENTBRIDGE_ALERTS %v", fn, env["SES_FROM"], env["EVENTBRIDGE_ALERTS"])
		}
	}
}
