package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/authorizer"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/httpapi"
)

// A push with both headers is authenticated by Authorization alone: a
// refused bearer token is not rescued by a valid notification token.
func TestA2ANotificationTokenOnlyWithoutAuthorization(t *testing.T) {
	ap := startApp(t)
	body := mustJSON(map[string]any{"message": map[string]any{"messageId": "m-1", "taskId": "task-1", "contextId": "ctx-1"}})
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+badToken)
	hdr.Set(auth.NotificationTokenHeader, allToken)
	if a := doHeaders(ap.Handler, "POST", "/v1/agents/"+agent+"/a2a", hdr, body); a.status != http.StatusUnauthorized {
		t.Fatalf("bad bearer token with a good notification token: %d %s", a.status, a.body)
	}
	hdr.Set("Authorization", "Bearer "+allToken)
	hdr.Set(auth.NotificationTokenHeader, badToken)
	if a := doHeaders(ap.Handler, "POST", "/v1/agents/"+agent+"/a2a", hdr, body); a.status != http.StatusOK {
		t.Fatalf("good bearer token with a bad notification token: %d %s", a.status, a.body)
	}
}

// The activation is echoed as A2A-Extensions, and also as X-A2A-Extensions
// when the request used that (0.3) spelling; nothing when it did not
// activate the extension.
func TestA2AEchoesActivationSpelling(t *testing.T) {
	ap := startApp(t)
	body := mustJSON(map[string]any{"message": map[string]any{"messageId": "m-1", "taskId": "task-1", "contextId": "ctx-1"}})
	for _, c := range []struct {
		name            string
		send            map[string]string
		wantA2A, wantX  bool
		wantNoExtHeader bool
	}{
		{"1.0 spelling", map[string]string{"A2A-Extensions": expect.URI}, true, false, false},
		{"0.3 spelling", map[string]string{"X-A2A-Extensions": "https://example.com/other, " + expect.URI}, true, true, false},
		{"both", map[string]string{"A2A-Extensions": expect.URI, "X-A2A-Extensions": expect.URI}, true, true, false},
		{"other extension only", map[string]string{"X-A2A-Extensions": "https://example.com/other"}, false, false, true},
		{"none", nil, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			hdr := http.Header{}
			hdr.Set("Authorization", "Bearer "+allToken)
			for k, v := range c.send {
				hdr.Set(k, v)
			}
			a := doHeaders(ap.Handler, "POST", "/v1/agents/"+agent+"/a2a", hdr, body)
			if a.status != 200 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			if got := a.header.Get("A2A-Extensions") == expect.URI; got != c.wantA2A {
				t.Errorf("A2A-Extensions = %q", a.header.Get("A2A-Extensions"))
			}
			if got := a.header.Get("X-A2A-Extensions") == expect.URI; got != c.wantX {
				t.Errorf("X-A2A-Extensions = %q", a.header.Get("X-A2A-Extensions"))
			}
			if c.wantNoExtHeader && (a.header.Get("A2A-Extensions") != "" || a.header.Get("X-A2A-Extensions") != "") {
				t.Errorf("echoed an activation the request did not make: %v", a.header)
			}
		})
	}
}

// pythonSDK returns the python of a virtualenv holding the official A2A
// Python SDK 0.3 (testdata/a2a-python/venv.sh). Unavailable, the test is
// skipped, and fails under CI=true.
func pythonSDK(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "testdata/a2a-python/venv.sh", "python")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		switch strings.ToLower(os.Getenv("CI")) {
		case "true", "1", "yes":
			t.Fatalf("A2A Python SDK unavailable (CI=true, so this fails instead of skipping): %v: %s", err, stderr.String())
		}
		t.Skipf("A2A Python SDK unavailable: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

type pushAnswer struct {
	Status  int               `json:"status"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
	Sent    map[string]string `json:"sent"`
}

// pushWithPythonSDK pushes tasks to url with the SDK's push sender and the
// notification token, and returns the server's answers.
func pushWithPythonSDK(t *testing.T, python, url, token string, tasks ...map[string]any) []pushAnswer {
	t.Helper()
	args := []string{"testdata/a2a-python/push03.py", url, token}
	for _, task := range tasks {
		args = append(args, string(mustJSON(task)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("push03.py: %v: %s", err, stderr.String())
	}
	var answers []pushAnswer
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a pushAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("push03.py printed %q: %v", sc.Text(), err)
		}
		answers = append(answers, a)
	}
	if len(answers) != len(tasks) {
		t.Fatalf("%d answers to %d pushes; stderr: %s", len(answers), len(tasks), stderr.String())
	}
	return answers
}

// The official A2A Python SDK 0.3 push sender (BasePushNotificationSender)
// sends the task as its JSON, with the push config's token in
// X-A2A-Notification-Token and no Authorization header. Its pushes are
// accepted with that token, on the local server and behind API Gateway's
// authorizer as deployed: an expectation raised in a working task's
// artifact, then satisfied by a fact in the completed task's artifact. An
// unknown token, or a token without the scope the content needs, is
// refused.
func TestPythonSDK03PushSender(t *testing.T) {
	python := pythonSDK(t)
	ap := startApp(t)
	tokens := mustJSON(map[string]any{"tokens": testTokens()})
	authz := &authorizer.Authorizer{Load: func(context.Context) ([]byte, error) { return tokens, nil }, Log: quietLog()}
	behindGateway := httpapi.New(ap.Watcher, ap.Eval, authorizer.Gateway{Log: quietLog()}, quietLog())
	for _, mode := range []struct {
		name    string
		handler http.Handler
		refused int
	}{
		{"local", ap.Handler, http.StatusUnauthorized},
		{"aws", gateway(t, authz, behindGateway, func(string, string) bool { return false }), http.StatusForbidden},
	} {
		t.Run(mode.name, func(t *testing.T) {
			srv := httptest.NewServer(mode.handler)
			defer srv.Close()
			if a := do(ap.Handler, "PUT", "/v1/agents/"+agent, allToken, card()); a.status != 200 {
				t.Fatalf("card: %d %s", a.status, a.body)
			}
			url := srv.URL + "/v1/agents/" + agent + "/a2a"
			expID, taskID := "py-inv-42-"+mode.name, "task-py-"+mode.name
			meta := func(block map[string]any) map[string]any { return map[string]any{expect.URI: block} }
			working := map[string]any{"kind": "task", "id": taskID, "contextId": "ctx-py",
				"status": map[string]any{"state": "working"},
				"artifacts": []any{map[string]any{"artifactId": "art-1", "parts": []any{map[string]any{"kind": "text", "text": "invoice sent"}},
					"metadata": meta(map[string]any{"expectations": []any{expectationJSON(expID, "invoice.42.paid", "2099-12-01T09:00:00Z")}})}}}
			completed := map[string]any{"kind": "task", "id": taskID, "contextId": "ctx-py",
				"status": map[string]any{"state": "completed"},
				"artifacts": []any{map[string]any{"artifactId": "art-2", "parts": []any{map[string]any{"kind": "text", "text": "paid"}},
					"metadata": meta(map[string]any{"facts": []any{map[string]any{"factKey": "invoice.42.paid", "observedAt": "2026-01-01T00:00:00Z"}}})}}}

			answers := pushWithPythonSDK(t, python, url, allToken, working, completed)
			for i, a := range answers {
				if a.Status != 200 {
					t.Fatalf("push %d: %d %s", i, a.Status, a.Body)
				}
				if a.Sent[strings.ToLower(auth.NotificationTokenHeader)] != allToken || a.Sent["authorization"] != "" {
					t.Fatalf("the SDK sent other credentials than this test assumes: %v", a.Sent)
				}
			}
			var raised struct {
				Raised []struct {
					Expectation struct {
						ExpectationID string `json:"expectationId"`
					} `json:"expectation"`
					TaskID string `json:"taskId"`
				} `json:"raised"`
			}
			if err := json.Unmarshal([]byte(answers[0].Body), &raised); err != nil || len(raised.Raised) != 1 ||
				raised.Raised[0].Expectation.ExpectationID != expID || raised.Raised[0].TaskID != taskID {
				t.Fatalf("first push did not raise %s on %s: %s", expID, taskID, answers[0].Body)
			}
			var facts struct {
				Facts []struct {
					Satisfied []string `json:"satisfied"`
				} `json:"facts"`
			}
			if err := json.Unmarshal([]byte(answers[1].Body), &facts); err != nil || len(facts.Facts) != 1 ||
				len(facts.Facts[0].Satisfied) != 1 || facts.Facts[0].Satisfied[0] != expID {
				t.Fatalf("second push did not satisfy %s: %s", expID, answers[1].Body)
			}

			if a := pushWithPythonSDK(t, python, url, badToken, working)[0]; a.Status != mode.refused {
				t.Fatalf("unknown notification token: %d %s", a.Status, a.Body)
			}
			// A read-only token may not raise.
			if a := pushWithPythonSDK(t, python, url, scopeToken(auth.Read), working)[0]; a.Status != http.StatusForbidden {
				t.Fatalf("read-only notification token raising: %d %s", a.Status, a.Body)
			}
		})
	}
}
