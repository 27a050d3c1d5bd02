package a2aout

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/expect"
)

// TestReasonKeepsNoRemoteText: whatever the agent's URL answers (an HTTP
// error with a body, a JSON-RPC error with a message, something that is not
// A2A at all, nothing), the reason a record keeps names the class of the
// failure and none of the text the remote sent, in both A2A versions.
func TestReasonKeepsNoRemoteText(t *testing.T) {
	const secret = "db-password-hunter2"
	answers := map[string]http.HandlerFunc{
		"http error with a body": func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "internal: "+secret, http.StatusInternalServerError)
		},
		"json-rpc error": func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				ID any `json:"id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32603, "message": "failed: " + secret}})
		},
		"not a2a": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>"+secret+"</html>")
		},
	}
	want := map[string]string{
		"http error with a body": "HTTP 500",
		"json-rpc error":         "JSON-RPC error: internal error",
		"not a2a":                "not a valid A2A response",
	}
	for _, version := range []string{expect.ProtocolV1, expect.ProtocolV03} {
		for name, h := range answers {
			t.Run(version+"/"+name, func(t *testing.T) {
				srv := httptest.NewServer(h)
				defer srv.Close()
				card := expect.Card{AgentID: "agent-1", URL: srv.URL + "/a2a", ProtocolVersion: version, Declaration: expect.Declaration{LapseSkill: "handle-lapse"}}
				s := authSender(&staticCreds{}, nil)
				_, err := s.SendLapse(context.Background(), card, testMessage())
				if err == nil {
					t.Fatal("sent")
				}
				got := s.Describe(err)
				if strings.Contains(got, secret) || !strings.Contains(got, want[name]) {
					t.Fatalf("kept %q (want the class %q, no remote text); the error was %v", got, want[name], err)
				}
			})
		}
	}
	// Nothing listening: the class, without the address.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := authSender(&staticCreds{}, nil).SendLapse(context.Background(), expect.Card{AgentID: "agent-1", URL: url + "/a2a", ProtocolVersion: expect.ProtocolV1, Declaration: expect.Declaration{LapseSkill: "handle-lapse"}}, testMessage())
	if got := Reason(err); got != "connection refused" {
		t.Fatalf("kept %q for a closed port (%v)", got, err)
	}
}
