package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/client"
)

// The client's overhead per call against raw net/http, on a loopback
// server that answers a report of one fact with a fixed body, so that what
// differs is only the client side:
//
//	go test -run '^$' -bench CallOverhead -benchmem ./client
//
// raw sends pre-encoded bytes and discards the answer (what the load tool
// did before it used the client); raw+json also encodes the request and
// decodes the answer with encoding/json, as any caller must; client is
// ReportFacts. BenchmarkCallOverheadNoNetwork runs the same three over an
// in-process transport that answers at once, so only the client side's own
// work is measured (the loopback figures vary with the machine's load).

const benchAnswer = `{"facts":[{"factKey":"invoice.42.paid","satisfied":["inv-42-paid"]}]}` + "\n"

var benchFact = client.Fact{FactKey: "invoice.42.paid", ObservedAt: "2026-12-01T16:20:10Z"}

func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchAnswer)
	}))
	b.Cleanup(srv.Close)
	return srv
}

func BenchmarkCallOverhead(b *testing.B) {
	srv := benchServer(b)
	callOverhead(b, srv.URL, &http.Client{Transport: client.NewTransport()})
}

// cannedTransport answers every request with benchAnswer without a
// network, after reading the request's body as a server would.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(benchAnswer)), ContentLength: int64(len(benchAnswer)), Request: r}, nil
}

func BenchmarkCallOverheadNoNetwork(b *testing.B) {
	callOverhead(b, "http://127.0.0.1:1", &http.Client{Transport: cannedTransport{}})
}

func callOverhead(b *testing.B, base string, hc *http.Client) {
	url := base + "/v1/agents/demo-agent/facts"
	body, _ := json.Marshal(map[string]any{"facts": []client.Fact{benchFact}})

	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/json")
			res, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	})
	b.Run("raw+json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			in, _ := json.Marshal(struct {
				Facts []client.Fact `json:"facts"`
			}{[]client.Fact{benchFact}})
			req, _ := http.NewRequest("POST", url, bytes.NewReader(in))
			req.Header.Set("Authorization", "Bearer "+testToken)
			req.Header.Set("Content-Type", "application/json")
			res, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			var out struct {
				Facts []client.FactOutcome `json:"facts"`
			}
			err = json.NewDecoder(res.Body).Decode(&out)
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if err != nil || len(out.Facts) != 1 {
				b.Fatal(err)
			}
		}
	})
	b.Run("client", func(b *testing.B) {
		c, err := client.New(base, client.Options{Token: testToken, HTTPClient: hc})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			out, err := c.ReportFacts(ctx, "demo-agent", benchFact)
			if err != nil || len(out) != 1 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClientParallel is the client from many goroutines at once (the
// load tool's use), against the same fixed answer.
func BenchmarkClientParallel(b *testing.B) {
	srv := benchServer(b)
	c, err := client.New(srv.URL, client.Options{Token: testToken})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := c.ReportFacts(ctx, "demo-agent", benchFact); err != nil {
				b.Fatal(err)
			}
		}
	})
}
