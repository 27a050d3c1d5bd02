package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	logsv1 "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// otlpLogsReceiver is a loopback OTLP/HTTP logs receiver: it decodes each
// request with the official protobuf types (protojson, as the collector's
// otlphttp receiver decodes JSON) and keeps the log records by path, with
// the Authorization header they came with.
type otlpLogsReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	records map[string][]*logsv1.LogRecord
	auth    map[string]string
}

func startOTLPLogsReceiver(t *testing.T) *otlpLogsReceiver {
	rc := &otlpLogsReceiver{records: map[string][]*logsv1.LogRecord{}, auth: map[string]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collogs.ExportLogsServiceRequest
		if r.Method != "POST" || !strings.HasSuffix(r.URL.Path, "/v1/logs") || r.Header.Get("Content-Type") != "application/json" ||
			protojson.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP/HTTP JSON logs export", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				rc.records[r.URL.Path] = append(rc.records[r.URL.Path], sl.LogRecords...)
			}
		}
		rc.auth[r.URL.Path] = r.Header.Get("Authorization")
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// evaluations returns the gen_ai.evaluation.result records at path for a
// VERIFY, by evaluation name, with their attributes.
func (rc *otlpLogsReceiver) evaluations(path, vid string) map[string]map[string]any {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := map[string]map[string]any{}
	for _, r := range rc.records[path] {
		attrs := map[string]any{}
		for _, kv := range r.Attributes {
			if s := kv.Value.GetStringValue(); s != "" {
				attrs[kv.Key] = s
			} else {
				attrs[kv.Key] = kv.Value.GetDoubleValue()
			}
		}
		if r.EventName == "gen_ai.evaluation.result" && attrs["aigp.verification_id"] == vid {
			name, _ := attrs["gen_ai.evaluation.name"].(string)
			if _, dup := out[name]; dup {
				out[name+"#again"] = attrs
				continue
			}
			out[name] = attrs
		}
	}
	return out
}

// scenarioScoresOut: a VERIFY's scores reach an OpenTelemetry receiver as
// gen_ai.evaluation.result events, once each: through an agent's rule to
// an otlp channel (with its sealed Authorization header) and through the
// operator's scores channel (-scores-channel, SCORES_CHANNEL) for every
// agent. An otlp channel carries nothing but scores, and its headers are
// checked.
func scenarioScoresOut(t *testing.T) {
	rc := startOTLPLogsReceiver(t)
	e := startEnv(t, func(c *Config) {
		c.Notify.ScoresChannel = "ops-scores"
		c.Notify.BaseBackoff, c.Notify.MaxBackoff = 50*time.Millisecond, 300*time.Millisecond
	})
	agent, _ := seedMessage(t)["agent_id"].(string)
	registerAs(t, e, agent)
	e.must(201, e.call("PUT", "/v1/channels/ops-scores", map[string]any{"type": "otlp", "url": rc.srv.URL + "/ops/v1/logs"}))
	e.must(201, e.call("PUT", "/v1/channels/team-scores", map[string]any{"type": "otlp", "url": rc.srv.URL + "/team/v1/logs", "shared": false,
		"headers": map[string]string{"Authorization": "Bearer collector-secret"}}))
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/channels/bad-scores", map[string]any{"type": "otlp", "url": rc.srv.URL + "/v1/logs",
		"headers": map[string]string{"Content-Type": "text/plain"}})), "headers.Content-Type")
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed", "verification.completed"}, "channels": []string{"team-scores"}}}})), "rules[0].channels[0]")
	// Scores never become incidents, nor are held back.
	e.must(201, e.call("PUT", "/v1/channels/team-pd", map[string]any{"type": "pagerduty", "routingKey": "R0UT1NGKEY", "url": rc.srv.URL + "/v2/enqueue"}))
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"verification.completed"}, "channels": []string{"team-pd"}}}})), "rules[0].channels[0]")
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"verification.completed"}, "channels": []string{"team-scores"}, "cooldown": "PT1M"}}})), "rules[0].cooldown")
	e.must(200, e.call("PUT", "/v1/agents/"+agent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"verification.completed"}, "channels": []string{"team-scores"}}}}))
	// The channel test is an event the receiver takes too; its header
	// never reaches an answer.
	if r := e.must(200, e.call("POST", "/v1/channels/team-scores/test", nil)); !strings.Contains(string(r.body), `"delivered":true`) {
		t.Fatalf("channel test: %s", r.body)
	}
	if r := e.must(200, e.call("GET", "/v1/channels/team-scores", nil)); strings.Contains(string(r.body), "collector-secret") {
		t.Fatalf("the channel's header is shown: %s", r.body)
	}

	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-scores", "plan-scores")))
	runPlan(t, e, "plan-scores", 2, nil, allGood())
	v := e.waitVerification("ant-scores")
	if !v.Verdict.Final() {
		t.Fatalf("verdict %s", v.Verdict)
	}
	for _, path := range []string{"/team/v1/logs", "/ops/v1/logs"} {
		var got map[string]map[string]any
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if got = rc.evaluations(path, v.VerificationID); len(got) >= len(v.Results)+1 || time.Now().After(deadline) {
				break
			}
		}
		if len(got) != len(v.Results)+1 {
			t.Fatalf("%s: %d evaluation events for %d criteria and the verdict: %v", path, len(got), len(v.Results), got)
		}
		for _, r := range v.Results {
			a := got[r.CriterionID]
			if a == nil || a["gen_ai.agent.id"] != agent || a["aigp.plan_id"] != "plan-scores" || a["gen_ai.evaluation.score.label"] != strings.ToLower(map[anticipate.Status]string{
				anticipate.StatusPass: "pass", anticipate.StatusFail: "fail", anticipate.StatusErrored: "error", anticipate.StatusPending: "pending"}[r.Status]) ||
				r.Score != nil && a["gen_ai.evaluation.score.value"] != *r.Score {
				t.Errorf("%s: %s: %v; the VERIFY's %+v", path, r.CriterionID, a, r)
			}
		}
		if a := got["aigp.verdict"]; a == nil || a["gen_ai.evaluation.score.value"] != v.Score || a["gen_ai.evaluation.score.label"] != strings.ToLower(string(v.Verdict)) {
			t.Errorf("%s: the verdict's event %v; the VERIFY's %s %v", path, a, v.Verdict, v.Score)
		}
	}
	rc.mu.Lock()
	teamAuth, opsAuth := rc.auth["/team/v1/logs"], rc.auth["/ops/v1/logs"]
	rc.mu.Unlock()
	if teamAuth != "Bearer collector-secret" || opsAuth != "" {
		t.Errorf("Authorization: team %q, ops %q", teamAuth, opsAuth)
	}
	b, _ := json.Marshal(v.Results)
	t.Logf("%s: %d criteria and the verdict as gen_ai.evaluation.result events to both receivers (%d bytes of results)", backendKind, len(v.Results), len(b))
}
