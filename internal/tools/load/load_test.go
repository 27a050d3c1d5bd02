package main

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses, utime 250 and stime 50 ticks.
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 8 0 100 1000000 500 18446744073709551615"
	if got, want := parseStatCPU(line), 300*clockTick; got != want {
		t.Fatalf("parseStatCPU = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2"} {
		if got := parseStatCPU(bad); got != 0 {
			t.Errorf("parseStatCPU(%q) = %v, want 0", bad, got)
		}
	}
}

func TestCeilingHandler(t *testing.T) {
	h := ceilingHandler()
	for _, c := range []struct {
		auth, body string
		want       int
	}{
		{"Bearer " + token, `{"facts":[{"factKey":"k"}]}`, 200},
		{"Bearer other", `{}`, 401},
		{"Bearer " + token, `{"facts":`, 400},
	} {
		req := httptest.NewRequest("POST", "/v1/agents/load/facts", strings.NewReader(c.body))
		req.Header.Set("Authorization", c.auth)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Errorf("%s %s: %d, want %d", c.auth, c.body, w.Code, c.want)
		}
	}
}

func TestPrintHelpers(t *testing.T) {
	if got := projected(2, 200*time.Microsecond); got != "10000" {
		t.Errorf("projected = %s", got)
	}
	if got := ratio(1, 0); got != "-" {
		t.Errorf("ratio by zero = %s", got)
	}
}
