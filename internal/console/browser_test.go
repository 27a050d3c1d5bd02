package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/outbox"
)

// -screenshots writes the PNGs the test takes into a directory (the
// README's are made with -screenshots ../../docs/console); without it they
// go to the test's temporary directory and are only checked.
var screenshots = flag.String("screenshots", "", "directory to keep the console screenshots in")

const (
	adminToken = "console-admin-token"
	// runnerToken is agent-1's own (it declares the reviewed plans, so
	// "reviewer" may review them); secondToken is a second reviewer's.
	runnerToken = "console-runner-token"
	secondToken = "console-second-token"
)

// chromium finds the browser: $CHROMIUM, else chromium (Debian's package)
// or chromium-browser / google-chrome on PATH. With CI=true a missing
// browser fails the test; elsewhere it is skipped with the reason.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's chromium package (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); with CI=true this fails")
	return ""
}

// env is the embedded runtime behind a loopback server, with two A2A
// agents built on the official SDK: agent-1 answers lapse tasks, agent-down
// refuses them until told otherwise.
type env struct {
	t    *testing.T
	srv  *httptest.Server
	up   *a2atest.Agent
	down *a2atest.Agent
}

func startEnv(t *testing.T) *env {
	authn, err := auth.New([]auth.TokenSpec{{Token: adminToken, Principal: "reviewer", Scopes: auth.AllScopes, Agents: []string{"*"}},
		{Token: runnerToken, Principal: "runner", Scopes: auth.AllScopes, Agents: []string{"agent-1"}},
		{Token: secondToken, Principal: "second", Scopes: []auth.Scope{auth.GradesWrite, auth.Read}, Agents: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Start(app.Config{
		DataDir: t.TempDir(), Auth: authn, Log: slog.New(slog.DiscardHandler), AllowPrivateAgents: true,
		Rules:  func() expect.Config { c := expect.DefaultConfig(); c.Retain = time.Hour; return c }(),
		Outbox: outbox.Options{MaxAttempts: 2, BaseBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, AttemptTimeout: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	e := &env{t: t, srv: httptest.NewServer(a.Handler), up: a2atest.NewAgent(t, "1.0"), down: a2atest.NewAgent(t, "1.0")}
	t.Cleanup(e.srv.Close)
	e.must(200, "PUT", "/v1/agents/agent-1", json.RawMessage(e.up.Card()))
	e.must(200, "PUT", "/v1/agents/agent-down", json.RawMessage(e.down.Card()))
	return e
}

func (e *env) call(method, path string, body any) (int, []byte) {
	e.t.Helper()
	return e.callAs(adminToken, method, path, body)
}

// callAs is call with another token.
func (e *env) callAs(token, method, path string, body any) (int, []byte) {
	e.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (e *env) must(status int, method, path string, body any) []byte {
	e.t.Helper()
	code, b := e.call(method, path, body)
	if code != status {
		e.t.Fatalf("%s %s: %d, want %d: %s", method, path, code, status, b)
	}
	return b
}

func ts(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339Nano) }

func expectation(id, subject string, due time.Duration, extra ...any) map[string]any {
	m := map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": subject},
		"expects": "invoice " + subject + " is paid", "satisfiedBy": map[string]any{"factKey": "invoice." + subject + ".paid"},
		"dueAt": ts(due), "basis": "contract"}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func (e *env) raise(agent string, exps ...map[string]any) {
	e.t.Helper()
	e.must(200, "POST", "/v1/agents/"+agent+"/expectations", map[string]any{"taskId": "task-7", "contextId": "ctx-7", "expectations": exps})
}

// record reads one expectation record.
func (e *env) record(agent, id string) map[string]any {
	var r map[string]any
	_ = json.Unmarshal(e.must(200, "GET", "/v1/agents/"+agent+"/expectations/"+id, nil), &r)
	return r
}

// waitRecord polls the API until ok holds for the record.
func (e *env) waitRecord(agent, id string, what string, ok func(map[string]any) bool) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := e.record(agent, id)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s/%s never %s: %v", agent, id, what, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browser drives one headless Chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func newBrowser(t *testing.T) *browser {
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.WindowSize(1440, 900),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("lang", "en-US"))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithLogf(func(string, ...any) {}))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, dir: dir}
}

// do runs actions with a bound on the whole step.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\npage text:\n%s", what, err, b.text())
	}
}

// wait polls a JavaScript expression until it is truthy and returns it as a
// string.
func (b *browser) wait(what, expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Poll[any](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(40*time.Second)))
	if err != nil {
		b.t.Fatalf("%s: %v\npage text:\n%s", what, err, b.text())
	}
	return fmt.Sprint(v)
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return fmt.Sprint(v)
}

// set gives a form control a value, as a person picking or erasing it
// would, and fires the event the page listens to.
func (b *browser) set(sel, value, event string) {
	b.t.Helper()
	js, _ := json.Marshal([]string{sel, value, event})
	b.eval(`(([s, v, ev]) => { const el = document.querySelector(s); el.value = v; el.dispatchEvent(new Event(ev)); return true; })(` + string(js) + `)`)
}

func (b *browser) text() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
	if len(s) > 3000 {
		s = s[:3000]
	}
	return s
}

// shot saves a screenshot of the viewport and checks it is a PNG of the
// viewport's size.
func (b *browser) shot(name string, width, height int) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if sz := img.Bounds().Size(); sz.X != width || sz.Y != height {
		b.t.Errorf("screenshot %s is %dx%d, want %dx%d", name, sz.X, sz.Y, width, height)
	}
	if err := os.WriteFile(filepath.Join(b.dir, name), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// viewport sets the page's size: a phone (touch, mobile) or a desktop.
func (b *browser) viewport(width, height int64, phone bool) {
	b.t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if phone {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	b.do("viewport", chromedp.EmulateViewport(width, height, opts...))
}

// noHorizontalOverflow fails when the page is wider than the viewport
// (tables scroll inside their own box instead).
func (b *browser) noHorizontalOverflow(page string) {
	b.t.Helper()
	if got := b.eval(`document.documentElement.scrollWidth <= window.innerWidth`); got != "true" {
		b.t.Errorf("%s: the page is wider than the viewport (%s > %s)", page, b.eval(`document.documentElement.scrollWidth`), b.eval(`window.innerWidth`))
	}
}

func (b *browser) open(url string) {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url))
}

// TestConsole drives the console in a real headless Chromium against the
// embedded runtime: sign-in, a raise appearing live, an expectation lapsing
// on its timeline, a dead letter replayed, a HUMAN criterion graded (the
// verdict changes, and a grade on a final verdict shows the 409), at a
// desktop and a phone width.
func TestConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the browser test runs in the full run")
	}
	start := time.Now()
	e := startEnv(t)
	b := newBrowser(t)
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	b.viewport(1440, 900, false)
	console := e.srv.URL + "/console"

	// Sign in: a wrong token is refused on the page, the right one kept in
	// sessionStorage (and no cookie is set).
	b.open(console)
	b.wait("the sign-in form", `document.querySelector('#login #token')`)
	b.do("wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"), chromedp.Click(chromedp.CSS("#login button")))
	if got := b.wait("the refusal", `document.querySelector('.error') && document.querySelector('.error').textContent`); !strings.Contains(got, "401") {
		t.Errorf("wrong token: %q", got)
	}
	b.set("#token", "", "input")
	b.do("token", chromedp.SendKeys(chromedp.CSS("#token"), adminToken), chromedp.Click(chromedp.CSS("#login button")))
	b.wait("the agents", `document.querySelector('section.agent[data-agent="agent-1"]')`)
	if got := b.eval(`sessionStorage.getItem('clockwork.token') + '|' + document.cookie`); got != adminToken+"|" {
		t.Errorf("token storage: %q", got)
	}
	if got := b.eval(`document.querySelector('section.agent[data-agent="agent-1"]').innerText`); !strings.Contains(got, "handle-lapse") || !strings.Contains(got, "payment") || !strings.Contains(got, "shipment") {
		t.Errorf("agent card shows no lapse skill or kinds: %q", got)
	}
	b.shot("agents-desktop.png", 1440, 900)

	// Expectations: a raise through the API appears without a reload; one
	// due in 3 s lapses on its timeline, is delivered and shows its lapse
	// task; a satisfied one shows its fact and source.
	b.open(console + "#/agents/agent-1/expectations")
	b.wait("the list", `document.querySelector('#exp-count')`)
	e.raise("agent-1",
		expectation("inv-41-paid", "41", 90*time.Second, "grace", "PT30S"),
		expectation("inv-42-paid", "42", 3*time.Second),
		expectation("inv-43-paid", "43", 2*time.Minute, "grace", "PT1M", "horizon", ts(4*time.Minute)),
		expectation("inv-44-paid", "44", 3*time.Minute, "anchor", map[string]any{"expectationId": "inv-41-paid", "offset": "PT1M"}))
	b.wait("the raised row", `document.querySelector('article.exp[data-id="inv-42-paid"][data-state="open"] .timeline .mark.now')`)
	e.must(200, "POST", "/v1/agents/agent-1/facts", map[string]any{"facts": []any{map[string]any{"factKey": "invoice.41.paid", "observedAt": ts(0)}}})
	b.wait("the satisfied row", `document.querySelector('article.exp[data-id="inv-41-paid"][data-state="satisfied"] .mark.fact')`)
	if got := b.eval(`document.querySelector('article.exp[data-id="inv-41-paid"]').innerText`); !strings.Contains(got, "reviewer") {
		t.Errorf("the fact's source is not shown: %q", got)
	}
	lapsed := b.wait("the lapse on the timeline", `(() => {
		const a = document.querySelector('article.exp[data-id="inv-42-paid"][data-state="lapsed"]');
		if (!a || !a.querySelector('.mark.delivery')) return '';
		const left = k => parseFloat(a.querySelector('.mark.' + k).style.left);
		return [left('raised'), left('due'), left('lapsed'), left('now'), a.innerText].join('|');
	})()`)
	parts := strings.SplitN(lapsed, "|", 5)
	var raised, due, lapse, now float64
	fmt.Sscan(parts[0], &raised)
	fmt.Sscan(parts[1], &due)
	fmt.Sscan(parts[2], &lapse)
	fmt.Sscan(parts[3], &now)
	if !(raised < due && due <= lapse && lapse <= now) {
		t.Errorf("timeline positions raised %v, due %v, lapsed %v, now %v: not in time order", raised, due, lapse, now)
	}
	// Sorted by next instant: the open ones first, soonest first (inv-44
	// is due a minute after its anchor inv-41 was satisfied, inv-43 in two
	// minutes), then the closed ones.
	order := b.eval(`Array.from(document.querySelectorAll('article.exp')).map(a => a.dataset.id).join(',')`)
	if !strings.HasPrefix(order, "inv-44-paid,inv-43-paid,") {
		t.Errorf("order by next instant: %s", order)
	}
	rec := e.record("agent-1", "inv-42-paid")
	if id, _ := rec["lapseTaskId"].(string); id == "" || !strings.Contains(parts[4], id) {
		t.Errorf("lapse task id %q not on the page: %q", id, parts[4])
	}
	// Filters: by state (the server's) and kind and subject (the page's).
	b.set("#f-state", "lapsed", "change")
	b.wait("only the lapsed", `Array.from(document.querySelectorAll('article.exp')).map(a => a.dataset.id).join(',') === 'inv-42-paid'`)
	b.set("#f-state", "", "change")
	b.do("filter subject", chromedp.SendKeys(chromedp.CSS("#f-subject"), "43"))
	b.wait("only invoice 43", `Array.from(document.querySelectorAll('article.exp')).map(a => a.dataset.id).join(',') === 'inv-43-paid'`)
	b.set("#f-subject", "", "input")
	b.wait("all four", `document.querySelectorAll('article.exp').length === 4`)
	b.shot("expectations-desktop.png", 1440, 900)
	// Lineage and anchors are linked: the anchored one links its anchor.
	b.open(console + "#/agents/agent-1/expectations/inv-41-paid")
	if got := b.wait("the dependents", `(() => { const a = Array.from(document.querySelectorAll('a')).find(a => a.textContent === 'inv-44-paid' && a.getAttribute('href').endsWith('/inv-44-paid')); return a ? 'ok' : ''; })()`); got != "ok" {
		t.Errorf("dependent not linked")
	}
	// A final record says when it will be deleted (retention: an hour here).
	expires, _ := e.record("agent-1", "inv-41-paid")["expiresAt"].(string)
	if got := b.eval(`document.querySelector('article.exp[data-id="inv-41-paid"]').textContent`); expires == "" || !strings.Contains(got, "-retain-expectations") {
		t.Errorf("the satisfied record's expiry (%q) is not on its page: %q", expires, got)
	}

	// Alerts: a webhook channel (a loopback receiver that refuses at
	// first) and agent-down's rules; the page shows both, never the
	// secret, and the notification dead-lettered on the channel, which
	// Replay sends again once the receiver is back.
	var hookUp atomic.Bool
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hookUp.Load() {
			w.WriteHeader(http.StatusGone) // refused for good: dead at once
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	secret := "whsec_" + strings.Repeat("QUJD", 8)
	e.must(201, "PUT", "/v1/channels/ops-hook", map[string]any{"type": "webhook", "url": hook.URL + "/hook", "secret": secret})
	e.must(200, "PUT", "/v1/agents/agent-down/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed", "delivery.dead"}, "channels": []string{"ops-hook"}, "kinds": []string{"payment"}}}})

	// Dead letters: agent-down refuses both attempts; the page shows the
	// reason; Replay sends it again (now accepted) with the same messageId.
	e.down.FailNext(1000, http.StatusServiceUnavailable)
	e.raise("agent-down", expectation("inv-50-paid", "50", time.Second))
	dead := e.waitRecord("agent-down", "inv-50-paid", "dead-lettered", func(r map[string]any) bool {
		d, _ := r["delivery"].(map[string]any)
		return d != nil && d["deadLettered"] == true
	})
	b.open(console + "#/deadletters")
	reason := b.wait("the dead letter", `(() => { const r = document.querySelector('tr[data-id="inv-50-paid"] .reason'); return r && r.textContent; })()`)
	if !strings.Contains(reason, "503") || !strings.Contains(reason, "[server-error]") {
		t.Errorf("dead letter reason %q does not name the agent's answer and its class", reason)
	}
	b.shot("deadletters-desktop.png", 1440, 900)
	e.down.FailNext(0, 0)
	b.do("replay", chromedp.Click(chromedp.CSS(`tr[data-id="inv-50-paid"] button.replay`)))
	note := b.wait("the replay notice", `document.querySelector('.notice') && document.querySelector('.notice').textContent`)
	msgID := dead["delivery"].(map[string]any)["messageId"].(string)
	if !strings.Contains(note, msgID) {
		t.Errorf("replay notice %q does not name messageId %s", note, msgID)
	}
	e.waitRecord("agent-down", "inv-50-paid", "delivered after the replay", func(r map[string]any) bool {
		d, _ := r["delivery"].(map[string]any)
		return d != nil && d["deliveredAt"] != nil && d["deadLettered"] != true && d["messageId"] == msgID
	})
	b.wait("the row gone", `!document.querySelector('tr[data-id="inv-50-paid"]')`)

	e.must(201, "PUT", "/v1/silences/saturday-maintenance", map[string]any{"matchers": map[string]any{"agentId": "agent-quiet"},
		"cron": "0 2 * * 6", "timezone": "Europe/Riga", "duration": "PT4H", "comment": "database maintenance"})
	b.open(console + "#/alerts")
	b.wait("the channel", `document.querySelector('tr[data-channel="ops-hook"]')`)
	if got := b.wait("the silence", `(() => { const r = document.querySelector('tr[data-silence="saturday-maintenance"]'); return r ? r.innerText : ''; })()`); !strings.Contains(got, "0 2 * * 6") || !strings.Contains(got, "Europe/Riga") || !strings.Contains(got, "agent agent-quiet") {
		t.Errorf("the silence reads %q", got)
	}
	page := b.wait("the rule and the dead notifications", `(() => {
		const r = document.querySelector('tr[data-agent="agent-down"]');
		const d = document.querySelectorAll('#main tr[data-id^="ntf_"]');
		return r && d.length >= 2 ? document.querySelector('#main').innerText : '';
	})()`)
	if !strings.Contains(page, "expectation.lapsed, delivery.dead") || !strings.Contains(page, "410") || strings.Contains(page, secret) || !strings.Contains(page, "shared") {
		t.Errorf("alerts page: %q", page)
	}
	b.shot("alerts-desktop.png", 1440, 900)
	hookUp.Store(true)
	b.do("replay a notification", chromedp.Click(chromedp.CSS(`#main tr[data-id^="ntf_"] button.replay`)))
	b.wait("the replay notice", `document.querySelector('.notice') && document.querySelector('.notice').textContent.startsWith('Replayed ntf_')`)
	b.open(console + "#/agents/agent-down/expectations/inv-50-paid")
	b.wait("a delivered notification on the expectation", `(() => {
		const c = document.querySelector('#notifications');
		return c && /delivered/.test(c.innerText) && /expectation\.lapsed|delivery\.dead/.test(c.innerText);
	})()`)
	// Acknowledge, beside the lapse: the record names who and why, the
	// timeline shows it, the button is gone.
	b.do("acknowledge", chromedp.SendKeys(chromedp.CSS("#ack-note"), "on it"), chromedp.Click(chromedp.CSS("button#ack")))
	b.wait("the acknowledgement", `(() => {
		const a = document.querySelector('article.exp');
		return !document.querySelector('button#ack') && a && /acknowledged/.test(a.innerText) && /by reviewer/.test(a.innerText) && /on it/.test(a.innerText);
	})()`)
	ackRec := e.waitRecord("agent-down", "inv-50-paid", "acknowledged", func(r map[string]any) bool { return r["ack"] != nil })
	if ack := ackRec["ack"].(map[string]any); ack["by"] != "reviewer" || ack["note"] != "on it" {
		t.Errorf("acknowledged record: %v", ack)
	}

	// Anticipations: a VERIFY awaiting two HUMAN grades. Its digests and the
	// server's Ed25519 signature check out in the browser. Grading oc-h1 0
	// makes the verdict FAIL at once (full marks on oc-h2 could no longer
	// reach the threshold); grading oc-h2 then is the 409 of a final
	// verdict, shown as it is.
	e.declareAndRun(t)
	b.open(console + "#/agents/agent-1/anticipations")
	b.wait("the anticipation listed", `document.querySelector('tr[data-id="ant-console"]')`)
	b.open(console + "#/anticipations/ant-console")
	b.wait("the VERIFY", `document.querySelector('section.verify .verdict')`)
	if got := b.eval(`document.querySelector('section.verify .verdict').textContent`); got != "PENDING" {
		t.Errorf("verdict before grading: %q", got)
	}
	sig := b.wait("the signature check", `(() => { const s = document.querySelector('section.verify .sig .check'); return s && s.dataset.check + ' ' + s.textContent; })()`)
	if !strings.HasPrefix(sig, "ok ") {
		t.Errorf("server signature check: %q", sig)
	}
	if got := b.eval(`Array.from(document.querySelectorAll('.check')).filter(c => c.dataset.check !== 'ok').map(c => c.textContent).join('; ')`); got != "" {
		t.Errorf("checks that do not hold: %s", got)
	}
	if got := b.eval(`document.querySelectorAll('#events tr[data-seq]').length`); got != "7" {
		t.Errorf("events shown: %s, want 7", got)
	}
	b.do("grade oc-h1", chromedp.SendKeys(chromedp.CSS(`form.grade[data-criterion="oc-h1"] input[name=score]`), "0"),
		chromedp.SendKeys(chromedp.CSS(`form.grade[data-criterion="oc-h1"] input[name=rationale]`), "the email was wrong"),
		chromedp.Click(chromedp.CSS(`form.grade[data-criterion="oc-h1"] button`)))
	b.wait("the verdict changes", `document.querySelector('section.verify .verdict').textContent === 'FAIL'`)
	if got := b.eval(`document.querySelector('tr[data-criterion="oc-h1"]').innerText`); !strings.Contains(got, "human:reviewer") || !strings.Contains(got, "the email was wrong") {
		t.Errorf("graded criterion: %q", got)
	}
	b.wait("the re-signed VERIFY checks out", `(() => { const s = document.querySelector('section.verify .sig .check'); return s && s.dataset.check === 'ok'; })()`)
	b.do("grade oc-h2", chromedp.SendKeys(chromedp.CSS(`form.grade[data-criterion="oc-h2"] input[name=score]`), "1"),
		chromedp.Click(chromedp.CSS(`form.grade[data-criterion="oc-h2"] button`)))
	conflict := b.wait("the 409", `document.querySelector('.grade-msg .error') && document.querySelector('.grade-msg .error').textContent`)
	if !strings.HasPrefix(conflict, "409 ") || !strings.Contains(strings.ToLower(conflict), "final") {
		t.Errorf("409 shown as %q", conflict)
	}
	b.shot("grade-409-desktop.png", 1440, 900)

	// Evaluations: started from the form, a re-grade of agent-1's plan
	// with a rubric it fails is shown beside its original verdict (FAIL
	// since the grades above), with the summary and per-criterion rates.
	b.open(console + "#/evaluations")
	b.wait("the evaluation form", `document.querySelector('#start-evaluation #eval-agent')`)
	b.set("#eval-criteria", `[{"criterion_id":"no-steps","description":"no steps at all","measurement":"DETERMINISTIC","assertion":"step_count == 0","weight":1},`+
		`{"criterion_id":"some-steps","description":"some steps","measurement":"DETERMINISTIC","assertion":"step_count > 0","weight":1,"category":"trajectory"}]`, "input")
	b.set("#eval-policy", `{"grader_type":"CODE","passing_threshold":0.4,"weighted_scoring":true,"fail_on_any_anti_criteria":true}`, "input")
	b.do("start an evaluation", chromedp.SendKeys(chromedp.CSS("#eval-agent"), "agent-1"), chromedp.Click(chromedp.CSS("#start-evaluation button")))
	evalRow := b.wait("the re-graded plan", `(() => {
		const r = document.querySelector('#eval-results tr[data-plan="plan-console"]');
		return r && document.querySelector('[data-state="done"]') ? r.dataset.verdict + ' ' + r.dataset.changed + ' ' + r.innerText : '';
	})()`)
	if !strings.HasPrefix(evalRow, "PASS yes") || !strings.Contains(evalRow, "FAIL") || !strings.Contains(evalRow, "no-steps FAIL") {
		t.Errorf("the re-graded plan's row reads %q", evalRow)
	}
	if got := b.eval(`document.querySelector('#eval-pass-rate').textContent + ' ' + document.querySelector('#eval-changed').textContent + ' ' + document.querySelector('#eval-criteria-summary tr[data-criterion="some-steps"]').innerText`); !strings.HasPrefix(got, "100% 1 ") || !strings.Contains(got, "100%") {
		t.Errorf("the evaluation's summary reads %q", got)
	}
	b.shot("evaluation-desktop.png", 1440, 900)
	evalHash := b.eval(`location.hash`)
	b.open(console + "#/agents/agent-1/evaluations")
	if got := b.wait("the agent's evaluations", `(() => { const r = document.querySelector('#agent-evaluations tr[data-state="done"]'); return r ? r.innerText : ''; })()`); !strings.Contains(got, strings.TrimPrefix(evalHash, "#/evaluations/")) || !strings.Contains(got, "100%") {
		t.Errorf("the agent's evaluations read %q", got)
	}

	// Online evaluators: a plan of agent-1 that declared no ANTICIPATE,
	// sampled by its evaluator, is listed with its VERIFY.
	e.must(201, "PUT", "/v1/agents/agent-1/evaluators/every-run", map[string]any{"criteria": []any{map[string]any{"criterion_id": "few-steps",
		"description": "at most five steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 5", "weight": 1}}, "sample": 1, "filter": map[string]any{"planIdPrefix": "sampled-"}})
	for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
		ev := map[string]any{"protocol_version": "4.1", "message_type": typ, "event_id": fmt.Sprintf("sampled-ev-%d", i), "timestamp": ts(0)}
		if code, b := e.callAs(runnerToken, "POST", "/v1/executions/sampled-1/events", ev); code != 202 {
			t.Fatalf("unbound event: %d %s", code, b)
		}
	}
	b.open(console + "#/agents/agent-1/evaluators")
	row := b.wait("the sampled VERIFY", `(() => { const r = document.querySelector('section.evaluator[data-evaluator="every-run"] tr[data-plan="sampled-1"][data-verdict="PASS"]'); return r ? r.innerText : ''; })()`)
	if !strings.Contains(row, "vrs-") {
		t.Errorf("the sampled VERIFY's row reads %q", row)
	}

	// Reviews: two plans declared by agent-1's own token, each reviewed
	// by "second" through the API and by the signed-in "reviewer" in the
	// inbox; each item's last review grades its VERIFY, and the agreement
	// page shows the queue's Cohen's kappa.
	e.must(201, "PUT", "/v1/review-queues/console-q", map[string]any{"reviewers": []string{"reviewer", "second"}, "reviewsPerItem": 2, "due": "PT4H"})
	items := e.reviewedPlans(t, "console-q", "plan-rv-1", "plan-rv-2")
	for i, it := range items {
		grade := "PASS"
		code, b := e.callAs(secondToken, "POST", "/v1/review-queues/console-q/items/"+it+"/reviews", map[string]any{"criterionId": "tone", "grade": grade})
		if code != 201 {
			t.Fatalf("second's review %d: %d %s", i, code, b)
		}
	}
	b.open(console + "#/reviews")
	b.wait("the inbox", `document.querySelectorAll('section.queue[data-queue="console-q"] article.item').length === 2`)
	b.shot("reviews-desktop.png", 1440, 900)
	b.do("review plan-rv-1", chromedp.SendKeys(chromedp.CSS(`article.item[data-plan="plan-rv-1"] form.review[data-criterion="tone"] input[name=comment]`), "polite"),
		chromedp.Click(chromedp.CSS(`article.item[data-plan="plan-rv-1"] form.review[data-criterion="tone"] button`)))
	b.wait("plan-rv-1 leaves the inbox", `document.querySelectorAll('section.queue[data-queue="console-q"] article.item').length === 1`)
	b.set(`article.item[data-plan="plan-rv-2"] form.review select[name=grade]`, "score", "change")
	b.do("review plan-rv-2", chromedp.SendKeys(chromedp.CSS(`article.item[data-plan="plan-rv-2"] form.review input[name=score]`), "0.2"),
		chromedp.Click(chromedp.CSS(`article.item[data-plan="plan-rv-2"] form.review button`)))
	b.wait("the inbox empties", `document.querySelector('section.queue[data-queue="console-q"][data-open="0"]')`)
	for plan, want := range map[string]string{"plan-rv-1": "PASS", "plan-rv-2": "FAIL"} {
		var vs struct {
			Verifications []anticipate.Verification `json:"verifications"`
		}
		_ = json.Unmarshal(e.must(200, "GET", "/v1/anticipations/ant-"+plan+"/verifications?agentId=agent-1", nil), &vs)
		if len(vs.Verifications) != 1 || string(vs.Verifications[0].Verdict) != want {
			t.Errorf("%s's VERIFY after its reviews: %+v, want %s", plan, vs.Verifications, want)
		}
	}
	b.do("the agreement link", chromedp.Click(chromedp.CSS(`section.queue[data-queue="console-q"] a[href$="/agreement"]`)))
	row = b.wait("the agreement", `(() => { const r = document.querySelector('#agreement tr[data-criterion="tone"]'); return r ? r.innerText : ''; })()`)
	// Labels (PASS, PASS) and (FAIL, PASS): observed 50%, kappa 0.
	if !strings.Contains(row, "cohen") || !strings.Contains(row, "50%") || !strings.Contains(row, "slight") {
		t.Errorf("the agreement row reads %q", row)
	}
	b.shot("agreement-desktop.png", 1440, 900)

	// Heartbeats: one pinged is up with its next due time and current
	// period; Pause on the page pauses it.
	e.must(201, "PUT", "/v1/agents/agent-1/heartbeats/nightly-sync", map[string]any{"kind": "payment", "cron": "0 2 * * *", "timezone": "Europe/Riga", "grace": "PT1H"})
	e.must(200, "POST", "/v1/agents/agent-1/heartbeats/nightly-sync/ping", nil)
	b.open(console + "#/agents/agent-1/heartbeats")
	row = b.wait("the heartbeat", `(() => { const r = document.querySelector('tr[data-heartbeat="nightly-sync"][data-status="up"]'); return r ? r.innerText : ''; })()`)
	if !strings.Contains(row, "0 2 * * *") || !strings.Contains(row, "Europe/Riga") || !strings.Contains(row, "hb:nightly-sync:1") {
		t.Errorf("the heartbeat row reads %q", row)
	}
	b.do("pause the heartbeat", chromedp.Click(chromedp.CSS(`tr[data-heartbeat="nightly-sync"] button.pause`)))
	b.wait("the paused heartbeat", `document.querySelector('tr[data-heartbeat="nightly-sync"][data-status="paused"] button.resume')`)
	b.shot("heartbeats-desktop.png", 1440, 900)

	// A phone's width: every page fits (tables scroll in their own box).
	b.viewport(390, 844, true)
	for _, p := range []struct{ hash, ready, shot string }{
		{"#/agents", `document.querySelector('section.agent')`, ""},
		{"#/agents/agent-1/expectations", `document.querySelector('article.exp .timeline')`, "expectations-phone.png"},
		{"#/deadletters", `document.querySelector('#no-deadletters')`, ""},
		{"#/alerts", `document.querySelector('tr[data-channel="ops-hook"]')`, ""},
		{"#/agents/agent-1/heartbeats", `document.querySelector('tr[data-heartbeat="nightly-sync"]')`, ""},
		{"#/anticipations/ant-console", `document.querySelector('section.verify .verdict')`, "anticipation-phone.png"},
		{"#/evaluations", `document.querySelector('#start-evaluation')`, ""},
		{evalHash, `document.querySelector('#eval-results tr[data-plan="plan-console"]')`, "evaluation-phone.png"},
		{"#/agents/agent-1/evaluators", `document.querySelector('section.evaluator')`, ""},
		{"#/reviews", `document.querySelector('section.queue[data-queue="console-q"]')`, ""},
		{"#/review-queues/console-q/agreement", `document.querySelector('#agreement')`, "agreement-phone.png"},
	} {
		b.open(console + p.hash)
		b.wait(p.hash+" at phone width", p.ready)
		b.noHorizontalOverflow(p.hash)
		if p.shot != "" {
			b.shot(p.shot, 390, 844)
		}
	}
	b.viewport(1440, 900, false)
	b.open(console + "#/agents")
	b.wait("desktop again", `document.querySelector('section.agent')`)
	b.noHorizontalOverflow("#/agents")
	t.Logf("console test took %v", time.Since(start).Round(time.Millisecond))
}

// reviewedPlans declares, with agent-1's own token, one plan per name
// whose HUMAN criterion "tone" is reviewed in queue, runs each to
// PLAN_COMPLETE and returns their review items' ids, in order.
func (e *env) reviewedPlans(t *testing.T, queue string, plans ...string) []string {
	raw, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, plan := range plans {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		m["anticipation_id"], m["plan_id"], m["agent_id"] = "ant-"+plan, plan, "agent-1"
		m["grading_policy"] = map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": false}
		m["expectations"] = map[string]any{"outcome_criteria": []any{map[string]any{"criterion_id": "tone", "description": "The reply to the customer is polite",
			"measurement": "HUMAN", "assertion": "A reviewer finds the reply polite", "weight": 1, "queue": queue}}}
		body, _ := json.Marshal(m)
		signed, err := anticipate.Sign(body)
		if err != nil {
			t.Fatal(err)
		}
		if code, b := e.callAs(runnerToken, "POST", "/v1/anticipations", json.RawMessage(signed)); code != 201 {
			t.Fatalf("declare %s: %d %s", plan, code, b)
		}
		for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
			ev := map[string]any{"protocol_version": "4.1", "message_type": typ, "event_id": fmt.Sprintf("%s-ev-%d", plan, i), "timestamp": ts(0)}
			if code, b := e.callAs(runnerToken, "POST", "/v1/executions/"+plan+"/events", ev); code != 202 {
				t.Fatalf("event %s: %d %s", plan, code, b)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			var page struct {
				Items []struct {
					ItemID string `json:"itemId"`
					PlanID string `json:"planId"`
				} `json:"items"`
			}
			_ = json.Unmarshal(e.must(200, "GET", "/v1/review-queues/"+queue+"/items", nil), &page)
			id := ""
			for _, it := range page.Items {
				if it.PlanID == plan {
					id = it.ItemID
				}
			}
			if id != "" {
				ids = append(ids, id)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no review item for %s", plan)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return ids
}

// declareAndRun declares an ANTICIPATE for agent-1 (the seed's criteria
// plus two HUMAN ones, threshold 0.9) and runs its plan to PLAN_COMPLETE.
func (e *env) declareAndRun(t *testing.T) {
	raw, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["anticipation_id"], m["plan_id"], m["agent_id"] = "ant-console", "plan-console", "agent-1"
	gp := m["grading_policy"].(map[string]any)
	gp["grader_type"], gp["passing_threshold"] = "COMPOSITE", 0.9
	ex := m["expectations"].(map[string]any)
	ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any),
		map[string]any{"criterion_id": "oc-h1", "description": "A reviewer confirms the welcome email", "measurement": "HUMAN", "assertion": "The welcome email is correct", "weight": 1.0},
		map[string]any{"criterion_id": "oc-h2", "description": "A reviewer confirms the audit note", "measurement": "HUMAN", "assertion": "The audit note names the ticket", "weight": 1.0})
	body, _ := json.Marshal(m)
	signed, err := anticipate.Sign(body)
	if err != nil {
		t.Fatal(err)
	}
	e.must(201, "POST", "/v1/anticipations", json.RawMessage(signed))
	n := 0
	post := func(typ string, fields ...any) {
		n++
		ev := map[string]any{"protocol_version": "4.1", "message_type": typ, "event_id": fmt.Sprintf("ev-%d", n), "timestamp": ts(0)}
		for i := 0; i+1 < len(fields); i += 2 {
			ev[fields[i].(string)] = fields[i+1]
		}
		e.must(202, "POST", "/v1/executions/plan-console/events", ev)
	}
	post("TOOL_REQUEST", "tool", "iam_create_user", "arguments", map[string]any{"username": "alice"})
	post("TOOL_RESULT", "tool", "iam_create_user", "status", "SUCCESS")
	post("STEP_COMPLETE")
	post("TOOL_REQUEST", "tool", "iam_add_to_group", "arguments", map[string]any{"username": "alice", "group": "engineering"})
	post("STEP_COMPLETE")
	obs := func(call string, v any, args ...any) map[string]any {
		return map[string]any{"call": call, "args": args, "value": v}
	}
	post("OUTCOME", "variables", map[string]any{"target_username": "alice"}, "observations", []any{
		obs("user_exists", true, "alice"), obs("group_member", true, "alice", "engineering"),
		obs("policy_count", 3, "alice"), obs("group_policy_count", 3, "engineering")})
	post("PLAN_COMPLETE")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out struct{ Verifications []json.RawMessage }
		_ = json.Unmarshal(e.must(200, "GET", "/v1/anticipations/ant-console/verifications", nil), &out)
		if len(out.Verifications) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no VERIFY")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
