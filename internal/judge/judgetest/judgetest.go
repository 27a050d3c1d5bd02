// Package judgetest serves the two model APIs the judges call, on loopback,
// speaking their wire formats as their public references document them: an
// OpenAI Chat Completions endpoint (POST /v1/chat/completions) and Amazon
// Bedrock's Converse (POST /model/{modelId}/converse, SigV4-signed,
// restJson1 errors). No emulator of either service exists to run here, so
// these stand in for them; each checks the shape of every request it gets
// (path, headers, body fields) and records it, and answers what the test
// scripts: a grade, an error, throttling, a refusal, a malformed answer or
// silence.
package judgetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Reply is one scripted answer. The zero Reply grades with Score and
// Rationale; the other fields make it something else.
type Reply struct {
	Score     float64
	Rationale string
	// Content, when set, is the model's text as is (a malformed answer).
	Content string
	// Status, when not 0 or 200, answers an error: ErrorType names it
	// (OpenAI error type, or Bedrock exception name), ErrorParam is
	// OpenAI's error param, RetryAfter the Retry-After header.
	Status     int
	ErrorType  string
	ErrorParam string
	Message    string
	RetryAfter string
	// Refusal is OpenAI's message.refusal.
	Refusal string
	// Finish is OpenAI's finish_reason or Bedrock's stopReason (default
	// "stop" / "end_turn").
	Finish string
	// Delay holds the answer back (a timeout).
	Delay time.Duration
}

// Request is one request the fake received, with its checked shape.
type Request struct {
	Path    string
	Header  http.Header
	Body    map[string]any
	Problem string // what was wrong with its shape, "" when nothing
}

// Server is one fake. Script answers the n-th request (from 0) for the
// criterion named in the prompt; nil grades every criterion 0.8.
type Server struct {
	URL    string
	Script func(n int, criterionID string) Reply

	mu       sync.Mutex
	requests []Request
	srv      *httptest.Server
}

// Requests returns what the fake has received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// CheckShapes fails t for every request whose shape was wrong.
func (s *Server) CheckShapes(t testing.TB) {
	t.Helper()
	for i, r := range s.Requests() {
		if r.Problem != "" {
			t.Errorf("request %d to %s: %s", i, r.Path, r.Problem)
		}
	}
}

func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	return len(s.requests) - 1
}

func (s *Server) reply(n int, criterion string) Reply {
	if s.Script == nil {
		return Reply{Score: 0.8, Rationale: "the evidence shows it"}
	}
	return s.Script(n, criterion)
}

var criterionLine = regexp.MustCompile(`(?m)^Criterion (\S+)$`)

// criterionOf finds the criterion id in a judge's prompt.
func criterionOf(prompt string) string {
	if m := criterionLine.FindStringSubmatch(prompt); m != nil {
		return m[1]
	}
	return ""
}

func (s *Server) start(t testing.TB, h http.HandlerFunc) {
	s.srv = httptest.NewServer(h) // loopback only
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
}

func readJSON(r *http.Request) (map[string]any, string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, "body unreadable: " + err.Error()
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, "body is not a JSON object: " + err.Error()
	}
	return body, ""
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func grade(rep Reply) string {
	if rep.Content != "" {
		return rep.Content
	}
	b, _ := json.Marshal(map[string]any{"score": rep.Score, "rationale": rep.Rationale})
	return string(b)
}

func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-r.Context().Done():
		return false
	}
}

// problems collects what is wrong with a request's shape.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }
func (p problems) String() string                  { return strings.Join(p, "; ") }
