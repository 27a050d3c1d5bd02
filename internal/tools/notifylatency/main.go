// Command notifylatency measures what alerting adds to a lapse on the
// embedded default: it raises -n expectations due over -spread, with a
// rule sending expectation.lapsed to a signed webhook on loopback (and the
// lapse tasks to an agent that accepts them), and prints the time from
// each lapse's commit (lapsedAt) to the webhook's receipt, and from each
// due time to the receipt, as p50, p99 and max.
//
//	go run ./internal/tools/notifylatency -n 2000
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
)

func main() {
	n := flag.Int("n", 1000, "expectations raised (each lapses once)")
	spread := flag.Duration("spread", 5*time.Second, "their due times are spread over this, starting 2s from now")
	flag.Parse()
	if err := run(*n, *spread); err != nil {
		fmt.Fprintln(os.Stderr, "notifylatency:", err)
		os.Exit(1)
	}
}

// acceptingSender stands for an agent that takes every lapse task at once.
type acceptingSender struct{}

func (acceptingSender) Send(context.Context, expect.Card, a2aout.Message) (string, error) {
	return "task", nil
}

func run(n int, spread time.Duration) error {
	dir, err := os.MkdirTemp("", "notifylatency-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	token := auth.Generate()
	authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "load", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	a, err := app.Start(app.Config{DataDir: dir, Auth: authn, AllowPrivateAgents: true, Sender: acceptingSender{},
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()

	secret := alert.NewWebhookSecret()
	wh, _ := standardwebhooks.NewWebhook(secret)
	var mu sync.Mutex
	afterLapse, afterDue := []float64{}, []float64{}
	seen := map[string]bool{}
	done := make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		if wh.Verify(body, r.Header) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev struct {
			Data struct {
				Record expect.Record `json:"record"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		rec := ev.Data.Record
		lapsed, _ := expect.ParseTime(rec.Lapse.LapsedAt)
		due, _ := expect.ParseTime(rec.DueAt)
		mu.Lock()
		if !seen[rec.Expectation.ExpectationID] {
			seen[rec.Expectation.ExpectationID] = true
			afterLapse = append(afterLapse, at.Sub(lapsed).Seconds())
			afterDue = append(afterDue, at.Sub(due).Seconds())
			if len(seen) == n {
				close(done)
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	call := func(method, path string, body any) error {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			out, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return nil
	}
	card := fmt.Sprintf(`{"name":"load","description":"load agent","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:9/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extensions":[{"uri":%q,"params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"An invoice is paid","basis":"contract"}]}}]},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"lapse","name":"lapse","description":"handles lapses","tags":["lapse"]}]}`, expect.URI)
	if err := call("PUT", "/v1/agents/load", json.RawMessage(card)); err != nil {
		return err
	}
	if err := call("PUT", "/v1/channels/hook", map[string]any{"type": "webhook", "url": hook.URL, "secret": secret}); err != nil {
		return err
	}
	if err := call("PUT", "/v1/agents/load/alerts", map[string]any{"rules": []any{map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"hook"}}}}); err != nil {
		return err
	}
	start := time.Now().Add(2 * time.Second)
	for i := 0; i < n; i += 50 {
		var es []any
		for j := i; j < min(i+50, n); j++ {
			due := start.Add(time.Duration(int64(spread) * int64(j) / int64(n)))
			es = append(es, map[string]any{"expectationId": fmt.Sprintf("e-%d", j), "kind": "payment",
				"subject": map[string]any{"type": "invoice", "id": fmt.Sprint(j)}, "expects": "paid",
				"satisfiedBy": map[string]any{"factKey": fmt.Sprintf("paid.%d", j)}, "dueAt": expect.FormatTime(due), "basis": "contract"})
		}
		if err := call("POST", "/v1/agents/load/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": es}); err != nil {
			return err
		}
	}
	select {
	case <-done:
	case <-time.After(spread + 2*time.Minute):
		return fmt.Errorf("only %d of %d notifications arrived", len(seen), n)
	}
	fmt.Printf("notifications: %d lapses, each to a signed webhook on loopback (embedded default, fsync per commit)\n", n)
	fmt.Printf("lapse committed -> webhook received: %s\n", quantiles(afterLapse))
	fmt.Printf("due time        -> webhook received: %s\n", quantiles(afterDue))
	return nil
}

func quantiles(xs []float64) string {
	sort.Float64s(xs)
	q := func(p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] * 1000 }
	return fmt.Sprintf("p50 %.1f ms, p99 %.1f ms, max %.1f ms", q(0.5), q(0.99), xs[len(xs)-1]*1000)
}
