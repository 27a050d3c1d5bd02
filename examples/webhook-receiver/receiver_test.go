package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentclock/clockwork/internal/alert"
)

// TestReceiver: a signed notification is accepted, a tampered one refused;
// README.md shows this receiver's handler as it is here.
func TestReceiver(t *testing.T) {
	secret := alert.NewWebhookSecret()
	h, err := receiver(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"expectation.lapsed","timestamp":"2026-01-01T00:00:00Z","data":{"agentId":"agent-1"}}`
	wh, _ := standardwebhooks.NewWebhook(secret)
	now := time.Now()
	sig, _ := wh.Sign("ntf_1", now, []byte(body))
	send := func(b string) int {
		req := httptest.NewRequest("POST", "/", strings.NewReader(b))
		req.Header.Set("webhook-id", "ntf_1")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if c := send(body); c != http.StatusNoContent {
		t.Fatalf("signed: %d", c)
	}
	if c := send(strings.Replace(body, "agent-1", "agent-2", 1)); c != http.StatusUnauthorized {
		t.Fatalf("tampered: %d", c)
	}
	src, _ := os.ReadFile("main.go")
	readme, _ := os.ReadFile("../../README.md")
	start := strings.Index(string(src), "\twh, err := standardwebhooks.NewWebhook(secret)")
	end := strings.Index(string(src), "\t\tw.WriteHeader(http.StatusNoContent)")
	if start < 0 || end < 0 || !strings.Contains(string(readme), string(src)[start:end]) {
		t.Fatal("README.md does not show the receiver's handler as examples/webhook-receiver/main.go has it")
	}
}
