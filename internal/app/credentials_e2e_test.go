package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/awsops"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/netguard"
)

// syncBuffer collects log lines written concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// secretScan gathers everything the service showed or stored during a
// scenario and fails if a secret appears in clear (or base64, as an HTTP
// Basic header would carry it).
type secretScan struct {
	e       *testEnv
	logs    *syncBuffer
	bodies  [][]byte
	secrets []string
}

func (s *secretScan) call(method, path string, body any) resp {
	s.e.t.Helper()
	r := s.e.call(method, path, body)
	s.bodies = append(s.bodies, r.body)
	for k, vs := range r.header {
		s.bodies = append(s.bodies, []byte(k+": "+strings.Join(vs, ", ")))
	}
	return r
}

// stored returns every stored item's bytes: the embedded store's file as
// it lies on disk, or a scan of the DynamoDB table.
func (s *secretScan) stored() []byte {
	t := s.e.t
	if s.e.aws {
		var out []byte
		p := dynamodb.NewScanPaginator(s.e.rt.DynamoDB, &dynamodb.ScanInput{TableName: &s.e.table})
		for p.HasMorePages() {
			// The test's own look at the table, no function's.
			page, err := p.NextPage(awsops.WithFunction(context.Background(), awsops.TestHarness))
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				b, _ := json.Marshal(it)
				out = append(out, b...)
			}
		}
		return out
	}
	b, err := os.ReadFile(filepath.Join(s.e.dir, "clockwork.db"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s *secretScan) check() {
	t := s.e.t
	t.Helper()
	places := map[string][]byte{"responses": bytes.Join(s.bodies, []byte("\n")), "logs": s.logs.Bytes(), "stored items": s.stored()}
	if len(places["logs"]) == 0 || len(places["stored items"]) == 0 {
		t.Fatal("secret scan: nothing to scan")
	}
	for where, b := range places {
		for _, secret := range s.secrets {
			for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))} {
				if bytes.Contains(b, []byte(form)) {
					t.Errorf("a secret appears in the %s", where)
				}
			}
		}
	}
}

// scenarioAgentRequiresBearer: a lapse to an agent whose card requires a
// bearer token, with no credentials, is refused (401) and dead-lettered at
// once, naming the scheme and the status; credentials that do not fit the
// card are refused naming the field; after a PUT of the right token the
// replay delivers with the same messageId, the SDK agent sees an
// authenticated user, and delivery.activated is recorded. No secret
// appears in any response, log line or stored item.
func scenarioAgentRequiresBearer(t *testing.T) {
	logs := &syncBuffer{}
	e := startEnv(t, func(c *Config) { c.Log = jsonLog(logs) })
	scan := &secretScan{e: e, logs: logs}
	token := "bearer-" + randomSecret(t)
	scan.secrets = []string{token}
	ag := a2atest.NewAgent(t, "1.0")
	ag.Require(a2atest.Bearer("bearer", func(tok string) bool { return tok == token }))
	e.must(200, scan.call("PUT", "/v1/agents/"+agentID, ag.Card()))

	e.must(200, scan.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("locked", ts(100*time.Millisecond)))))
	dead := e.waitRecord(agentID, "locked", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeadLettered })
	if dead.Delivery.Attempts != 1 || !strings.Contains(dead.Delivery.LastError, `scheme "bearer"`) || !strings.Contains(dead.Delivery.LastError, "401") {
		t.Fatalf("dead letter: %+v", dead.Delivery)
	}

	hasErrorPath(t, e.must(400, scan.call("PUT", "/v1/agents/"+agentID+"/credentials", map[string]any{"credentials": map[string]any{"nope": map[string]any{"token": token}}})), "credentials.nope")
	hasErrorPath(t, e.must(400, scan.call("PUT", "/v1/agents/"+agentID+"/credentials", map[string]any{"credentials": map[string]any{"bearer": map[string]any{"token": token, "password": token}}})), "credentials.bearer.password")
	var conf struct{ Configured []string }
	e.must(200, scan.call("GET", "/v1/agents/"+agentID+"/credentials", nil)).json(t, &conf)
	if len(conf.Configured) != 0 {
		t.Fatalf("refused PUTs configured %v", conf.Configured)
	}
	e.must(404, scan.call("PUT", "/v1/agents/no-card/credentials", map[string]any{"credentials": map[string]any{"bearer": map[string]any{"token": token}}}))

	// Wrong token first: still refused, and the reason names the scheme.
	e.must(200, scan.call("PUT", "/v1/agents/"+agentID+"/credentials", map[string]any{"credentials": map[string]any{"bearer": map[string]any{"token": "wrong-" + token}}}))
	e.must(200, scan.call("POST", "/v1/agents/"+agentID+"/expectations/locked/redeliver", nil))
	// Redeliver answered with the letter back in the outbox (attempts 0);
	// it is dead again after one refused attempt.
	again := e.waitRecord(agentID, "locked", func(r *expect.Record) bool { return r.Delivery.DeadLettered })
	if again.Delivery.Attempts != 1 || !strings.Contains(again.Delivery.LastError, `scheme "bearer"`) || again.LapseTaskID != "" {
		t.Fatalf("wrong token: %+v", again.Delivery)
	}

	e.must(200, scan.call("PUT", "/v1/agents/"+agentID+"/credentials", map[string]any{"credentials": map[string]any{"bearer": map[string]any{"token": token}}})).json(t, &conf)
	if len(conf.Configured) != 1 || conf.Configured[0] != "bearer" {
		t.Fatalf("configured %v", conf.Configured)
	}
	e.must(200, scan.call("POST", "/v1/agents/"+agentID+"/expectations/locked/redeliver", nil))
	ok := e.waitRecord(agentID, "locked", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	if ok.Delivery.MessageID != dead.Delivery.MessageID || ok.Delivery.Activated == nil || !*ok.Delivery.Activated || ok.Delivery.DeadLettered {
		t.Fatalf("replayed: %+v", ok.Delivery)
	}
	got := ag.WaitFor(1, 10*time.Second)
	if len(got) != 1 || got[0].MessageID != dead.Delivery.MessageID || got[0].User != "bearer" {
		t.Fatalf("agent received %+v", got)
	}
	scan.call("GET", "/v1/agents/"+agentID+"/expectations/locked", nil)
	scan.call("GET", "/v1/deadletters", nil)
	scan.check()

	e.must(200, scan.call("DELETE", "/v1/agents/"+agentID+"/credentials", nil))
	e.must(200, scan.call("GET", "/v1/agents/"+agentID+"/credentials", nil)).json(t, &conf)
	if len(conf.Configured) != 0 {
		t.Fatalf("after DELETE: %v", conf.Configured)
	}
}

// scenarioAgentRequiresOAuthAndMTLS: a 0.3 agent behind TLS requiring
// OAuth 2.0 client credentials and a client certificate together (a test
// CA generated here): delivered with a token from the local token endpoint
// (fetched through the guard) and the certificate; a later lapse reuses
// the cached token.
func scenarioAgentRequiresOAuthAndMTLS(t *testing.T) {
	ca := a2atest.NewTestCA(t)
	ag := a2atest.NewTLSAgent(t, "0.3", ca.Pool)
	roots := x509.NewCertPool()
	roots.AddCert(ag.ServerCertificate())
	client := netguard.NewHTTPClient(netguard.Guard{AllowPrivate: true}, 15*time.Second)
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	logs := &syncBuffer{}
	e := startEnv(t, func(c *Config) { c.AgentHTTPClient = client; c.Log = jsonLog(logs) })
	scan := &secretScan{e: e, logs: logs}

	clientSecret := "cs-" + randomSecret(t)
	tokens := a2atest.NewTokenServer(t, "clockwork", clientSecret)
	ag.Require(a2atest.OAuth2("oauth", tokens.TokenURL(), tokens.Valid), a2atest.MutualTLS("mtls"))
	certPEM, keyPEM := ca.ClientCert(t, "clockwork")
	scan.secrets = []string{clientSecret, strings.Split(keyPEM, "\n")[1]}
	e.must(200, scan.call("PUT", "/v1/agents/"+agentID, ag.Card()))
	e.must(200, scan.call("PUT", "/v1/agents/"+agentID+"/credentials", map[string]any{"credentials": map[string]any{
		"oauth": map[string]any{"clientId": "clockwork", "clientSecret": clientSecret, "scopes": []string{"lapses"}},
		"mtls":  map[string]any{"certificate": certPEM, "privateKey": keyPEM},
	}}))
	for i, id := range []string{"first", "second"} {
		e.must(200, scan.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment(id, ts(100*time.Millisecond)))))
		rec := e.waitRecord(agentID, id, func(r *expect.Record) bool {
			return r.LapseTaskID != "" || (r.Delivery != nil && r.Delivery.DeadLettered)
		})
		if rec.LapseTaskID == "" || rec.Delivery.Activated == nil || !*rec.Delivery.Activated {
			t.Fatalf("lapse %s: %+v", id, rec.Delivery)
		}
		if got := ag.WaitFor(i+1, 10*time.Second); len(got) != i+1 || got[i].User != "oauth+mtls" {
			t.Fatalf("agent received %+v", got)
		}
	}
	if n := tokens.Issued(); n != 1 {
		t.Fatalf("%d tokens issued for two lapses, want 1 (cached)", n)
	}
	scan.check()
}

// jsonLog logs everything (debug included) as JSON to w.
func jsonLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// randomSecret returns 24 random hex digits.
func randomSecret(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// scenarioRepointedCardDropsCredentials: credentials stored for an agent's
// card are dropped when the card is PUT again pointing at another host (the
// answer's Clockwork-Credentials-Dropped header and GET .../credentials say
// so), and the next lapse reaches the new host without any secret: it is
// refused there and dead-lettered, naming the scheme (issue 27, finding 3).
func scenarioRepointedCardDropsCredentials(t *testing.T) {
	e := startEnv(t)
	token := "bearer-" + randomSecret(t)
	ag := a2atest.NewAgent(t, "1.0")
	ag.Require(a2atest.Bearer("bearer", func(tok string) bool { return tok == token }))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID, ag.Card()))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/credentials", map[string]any{"credentials": map[string]any{"bearer": map[string]any{"token": token}}}))

	// Re-PUTting the same card keeps them.
	if r := e.must(200, e.call("PUT", "/v1/agents/"+agentID, ag.Card())); r.header.Get("Clockwork-Credentials-Dropped") != "" {
		t.Fatalf("the same card dropped %q", r.header.Get("Clockwork-Credentials-Dropped"))
	}
	// The attacker's host: an agent of its own, requiring the same scheme.
	evil := a2atest.NewAgent(t, "1.0")
	var seen []string
	var mu sync.Mutex
	evil.Require(a2atest.Bearer("bearer", func(tok string) bool {
		mu.Lock()
		seen = append(seen, tok)
		mu.Unlock()
		return false
	}))
	evilCard := strings.ReplaceAll(string(ag.Card()), ag.URL(), strings.Replace(evil.URL(), "127.0.0.1", "localhost", 1))
	r := e.must(200, e.call("PUT", "/v1/agents/"+agentID, []byte(evilCard)))
	if r.header.Get("Clockwork-Credentials-Dropped") != "bearer" {
		t.Fatalf("re-pointed card: Clockwork-Credentials-Dropped %q", r.header.Get("Clockwork-Credentials-Dropped"))
	}
	var conf struct {
		Configured []string
		Dropped    []struct{ Scheme, Reason, At string }
	}
	e.must(200, e.call("GET", "/v1/agents/"+agentID+"/credentials", nil)).json(t, &conf)
	if len(conf.Configured) != 0 || len(conf.Dropped) != 1 || conf.Dropped[0].Scheme != "bearer" || !strings.Contains(conf.Dropped[0].Reason, "changed") {
		t.Fatalf("credentials after the re-pointed card: %+v", conf)
	}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("moved", ts(100*time.Millisecond)))))
	dead := e.waitRecord(agentID, "moved", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeadLettered })
	if !strings.Contains(dead.Delivery.LastError, `scheme "bearer"`) {
		t.Fatalf("dead letter: %+v", dead.Delivery)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tok := range seen {
		if tok == token {
			t.Fatal("the stored token reached the re-pointed endpoint")
		}
	}
	if len(ag.Received()) != 0 {
		t.Fatalf("the old endpoint received %d lapses", len(ag.Received()))
	}
}
