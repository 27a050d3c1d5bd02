package app

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/outbox"
)

// agentLink is a loopback TCP forwarder in front of a test agent, so the
// agent can go down and come back at the same URL: while up it proxies
// every connection to the agent; down closes its listener (new connections
// are refused) and cuts the open ones; up listens again on the same port.
type agentLink struct {
	t      *testing.T
	addr   string // 127.0.0.1:port, the same for the link's life
	target string // the agent's host:port

	mu       sync.Mutex
	ln       net.Listener // nil while down
	conns    map[net.Conn]struct{}
	accepted int
	wg       sync.WaitGroup
}

func newAgentLink(t *testing.T, target string) *agentLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &agentLink{t: t, addr: ln.Addr().String(), target: target, conns: map[net.Conn]struct{}{}}
	l.serve(ln)
	t.Cleanup(func() { l.down(); l.wg.Wait() })
	return l
}

func (l *agentLink) serve(ln net.Listener) {
	l.ln = ln
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.wg.Add(1)
			go func() { defer l.wg.Done(); l.pipe(c) }()
		}
	}()
}

// pipe proxies one connection both ways until either side ends, then
// closes both (so a client giving up cancels the agent's request).
func (l *agentLink) pipe(c net.Conn) {
	u, err := net.Dial("tcp", l.target)
	if err != nil {
		c.Close()
		return
	}
	l.mu.Lock()
	if l.ln == nil { // went down meanwhile
		l.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	l.accepted++
	l.conns[c], l.conns[u] = struct{}{}, struct{}{}
	l.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	<-done
	l.mu.Lock()
	delete(l.conns, c)
	delete(l.conns, u)
	l.mu.Unlock()
}

// down stops listening and cuts every open connection: from now on the
// agent's URL refuses connections.
func (l *agentLink) down() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln == nil {
		return
	}
	_ = l.ln.Close()
	l.ln = nil
	for c := range l.conns {
		_ = c.Close()
	}
}

// up listens again on the same address.
func (l *agentLink) up() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		return
	}
	var err error
	for range 50 { // the port is only briefly unavailable, if at all
		var ln net.Listener
		if ln, err = net.Listen("tcp", l.addr); err == nil {
			l.serve(ln)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	l.t.Fatalf("agent link cannot listen again on %s: %v", l.addr, err)
}

// registerBehindLink registers an A2A 1.0 agent whose card sends lapse
// tasks through an agentLink (which the test takes down and up), not to
// the agent itself.
func registerBehindLink(t *testing.T, e *testEnv) (*a2atest.Agent, *agentLink) {
	t.Helper()
	var link *agentLink
	ag := register(t, e, "1.0", func(card map[string]any) {
		iface := card["supportedInterfaces"].([]any)[0].(map[string]any)
		u, err := url.Parse(iface["url"].(string))
		if err != nil {
			t.Fatal(err)
		}
		link = newAgentLink(t, u.Host)
		u.Host = link.addr
		iface["url"] = u.String()
	})
	return ag, link
}

func (l *agentLink) connections() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// scenarioAgentDownSlowThenBack covers an agent that is down (connections
// refused) and one that is slow (answers after the attempt timeout), each
// first for less than the attempt budget (the lapse is delivered once the
// agent is back, without a dead letter) and then for longer (the lapse is
// dead-lettered after MaxAttempts and replayed with the same messageId).
// Nothing is lost, attempts stay bounded, and the agent never sees two
// messageIds for one lapse.
func scenarioAgentDownSlowThenBack(t *testing.T) {
	const maxAttempts = 4
	e := startEnv(t, func(c *Config) {
		c.Outbox.MaxAttempts = maxAttempts
		// Backoffs long enough for the test to bring the agent back between
		// two attempts (the AWS mode keeps its own: 200ms doubling).
		c.Outbox.BaseBackoff, c.Outbox.MaxBackoff = 200*time.Millisecond, time.Second
		c.Outbox.AttemptTimeout = time.Second
	})
	slow := 10 * time.Second // far beyond the attempt timeout

	ag, link := registerBehindLink(t, e)

	raise := func(id string) {
		t.Helper()
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment(id, ts(100*time.Millisecond)))))
	}
	failedOnce := func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.Attempts >= 1 }
	delivered := func(r *expect.Record) bool { return r.LapseTaskID != "" }
	dead := func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeadLettered }
	// recovered checks a lapse delivered after failed attempts, without a
	// dead letter and within the budget.
	recovered := func(rec *expect.Record) {
		t.Helper()
		d := rec.Delivery
		if d.DeadLettered || d.Attempts < 2 || d.Attempts > maxAttempts || d.DeliveredAt == "" {
			t.Fatalf("%s: want delivered after 2..%d attempts, no dead letter: %+v", rec.Expectation.ExpectationID, maxAttempts, d)
		}
	}
	// deadThenReplayed checks a dead letter after exactly maxAttempts, brings
	// the agent back, replays it and checks the replay keeps the messageId.
	deadThenReplayed := func(id string, back func()) *expect.Record {
		t.Helper()
		d := e.waitRecord(agentID, id, dead)
		if d.Delivery.Attempts != maxAttempts || d.LapseTaskID != "" || d.Delivery.LastError == "" || d.Delivery.DeliveredAt != "" {
			t.Fatalf("%s: dead letter after %d attempts: %+v", id, maxAttempts, d.Delivery)
		}
		back()
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations/"+id+"/redeliver", nil))
		r := e.waitRecord(agentID, id, delivered)
		if r.Delivery.MessageID != d.Delivery.MessageID {
			t.Fatalf("%s: replay changed the messageId %s -> %s", id, d.Delivery.MessageID, r.Delivery.MessageID)
		}
		if r.Delivery.DeadLettered || r.Delivery.Attempts < 1 || r.Delivery.Attempts > maxAttempts {
			t.Fatalf("%s: replay: %+v", id, r.Delivery)
		}
		return r
	}
	var recs []*expect.Record

	// 1. Down briefly: refused at least once, back at the same URL before
	// the budget runs out.
	link.down()
	raise("down-brief")
	e.waitRecord(agentID, "down-brief", failedOnce)
	link.up()
	rec := e.waitRecord(agentID, "down-brief", delivered)
	recovered(rec)
	recs = append(recs, rec)

	// 2. Down for longer than the budget: dead-lettered, nothing reached the
	// agent, replayed once it is back.
	link.down()
	before := ag.Requests()
	raise("down-long")
	d := e.waitRecord(agentID, "down-long", dead)
	if !strings.Contains(d.Delivery.LastError, "refused") {
		t.Fatalf("down-long: last error %q is not a refused connection", d.Delivery.LastError)
	}
	if n := ag.Requests() - before; n != 0 {
		t.Fatalf("%d requests reached the agent while it was down", n)
	}
	recs = append(recs, deadThenReplayed("down-long", link.up))

	// 3. Slow briefly: at least one attempt times out, then it answers
	// promptly.
	ag.SetDelay(slow)
	raise("slow-brief")
	e.waitRecord(agentID, "slow-brief", failedOnce)
	ag.SetDelay(0)
	rec = e.waitRecord(agentID, "slow-brief", delivered)
	recovered(rec)
	recs = append(recs, rec)

	// 4. Slow for longer than the budget: every attempt times out, the
	// lapse is dead-lettered, and replayed once the agent answers promptly.
	ag.SetDelay(slow)
	before = ag.Requests()
	raise("slow-long")
	recs = append(recs, deadThenReplayed("slow-long", func() {
		if d := e.record(agentID, "slow-long"); !strings.Contains(d.Delivery.LastError, "deadline exceeded") {
			t.Fatalf("slow-long: last error %q is not a timed-out attempt", d.Delivery.LastError)
		}
		ag.SetDelay(0)
	}))
	if n := ag.Requests() - before; n < maxAttempts+1 {
		t.Fatalf("slow-long: %d requests reached the agent, want each of the %d timed-out attempts and the replay", n, maxAttempts)
	}

	// The agent saw one messageId per lapse (a timed-out attempt may show
	// it the same one again), each the lapse's own.
	got := ag.WaitFor(len(recs), 10*time.Second)
	first := map[string]a2atest.Received{}
	for _, m := range got {
		if _, ok := first[m.MessageID]; !ok {
			first[m.MessageID] = m
		}
	}
	if len(first) != len(recs) {
		t.Fatalf("the agent saw %d distinct messageIds for %d lapses", len(first), len(recs))
	}
	for _, r := range recs {
		if _, ok := first[r.Delivery.MessageID]; !ok {
			t.Fatalf("%s: its messageId %s never reached the agent", r.Expectation.ExpectationID, r.Delivery.MessageID)
		}
		checkLapseMessage(t, deliveredMessage(got, r), r, expect.Overdue)
	}
	if link.connections() == 0 {
		t.Fatal("no lapse task went through the link")
	}
}

// scenarioAgentDownThenBack covers an agent that is down (connections
// refused) for eight seconds, under the default retry policy (a day's
// window, waits growing with the time spent failing): the lapse is
// attempted while it is down, a restart (embedded) or the loss of every
// timer message for a while (AWS: the sweep finds the record) changes
// nothing, and the task reaches the agent once, within about the outage's
// length of its return. (The same at 90 s, 10 min and 1 h, on a simulated
// clock: outbox.TestAgentBackAfterAnOutageGetsItsTask.)
func scenarioAgentDownThenBack(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.Outbox = outbox.Options{} })
	ag, link := registerBehindLink(t, e)
	const outage = 8 * time.Second
	link.down()
	down := time.Now()
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("redeployed", ts(100*time.Millisecond)))))
	e.waitRecord(agentID, "redeployed", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.Attempts >= 1 })
	time.Sleep(2 * time.Second)
	if e.aws {
		e.loseTimerMessages.Store(true)
		time.Sleep(3 * time.Second)
		e.loseTimerMessages.Store(false)
	} else {
		e.stop()
		e.restart()
	}
	mid := e.record(agentID, "redeployed").Delivery
	if mid.DeadLettered || mid.DeliveredAt != "" || mid.LastErrorClass != "unreachable" || mid.FailingSince == "" || mid.NextAttemptAt == "" {
		t.Fatalf("while the agent is down: %+v", mid)
	}
	time.Sleep(time.Until(down.Add(outage)))
	link.up()
	back := time.Now()
	var rec *expect.Record
	for deadline := back.Add(outage + 20*time.Second); ; time.Sleep(50 * time.Millisecond) {
		if rec = e.record(agentID, "redeployed"); rec.LapseTaskID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered %s after the agent was back: %+v", time.Since(back), rec.Delivery)
		}
	}
	at, _ := expect.ParseTime(rec.Delivery.DeliveredAt)
	t.Logf("down %s: delivered %s after the agent was back, after %d failed attempts", outage, at.Sub(back).Round(10*time.Millisecond), rec.Delivery.Attempts-1)
	if d := rec.Delivery; d.DeadLettered || d.Attempts < 2 || d.LastError != "" || d.LastErrorClass != "" || d.WaitingForProbe {
		t.Fatalf("delivered: %+v", d)
	}
	got := ag.WaitFor(1, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	if n := len(ag.Received()); n != 1 || got[0].MessageID != rec.Delivery.MessageID {
		t.Fatalf("the agent received %d messages", n)
	}
}
