package awsrt

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/aws/aws-lambda-go/events"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// movableClock is a watcher clock the test moves forward.
type movableClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *movableClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *movableClock) advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// timerRuntime is a runtime on a fresh table with a timer queue (unless
// queueURL is given), on the movable clock; nothing polls the stream, the
// schedules or the queue: the tests call the handlers.
func timerRuntime(t *testing.T, clock *movableClock, queueURL string) (*Runtime, TimerQueue) {
	t.Helper()
	endpoint := dynamotest.Start(t)
	var b [4]byte
	rand.Read(b[:])
	name := fmt.Sprintf("timers-%x", b)
	cfg := Config{
		Table: name, ScheduleGroup: name,
		ClockFunctionARN: "arn:aws:lambda:us-east-1:000000000000:function:clock",
		SchedulerRoleARN: "arn:aws:iam::000000000000:role/scheduler",
		TokensJSON:       `{"tokens":[{"token":"t","principal":"p","scopes":["agents:write","expectations:write","facts:write","read"],"agents":["*"]}]}`,
		Endpoint:         endpoint, AllowPrivateAgents: true, Now: clock.now,
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	ac, err := AWSConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var q TimerQueue
	if queueURL == "" {
		if q, err = CreateTimerQueue(context.Background(), awsclient.NewSQSSender(ac), name+"-timers"); err != nil {
			t.Fatal(err)
		}
		queueURL = q.URL
	}
	cfg.TimerQueueURL = queueURL
	rt, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := dynamo.CreateTable(context.Background(), rt.DynamoDB, name); err != nil {
		t.Fatal(err)
	}
	if err := rt.Clock.CreateGroup(context.Background()); err != nil {
		t.Fatal(err)
	}
	call(t, rt.HTTP(), "PUT", "/v1/agents/a1", a2atest.NewAgent(t, "1.0").Card())
	return rt, q
}

func raiseDue(t *testing.T, rt *Runtime, id string, due time.Time) expect.Instant {
	t.Helper()
	call(t, rt.HTTP(), "POST", "/v1/agents/a1/expectations", map[string]any{"taskId": "t", "contextId": "c", "expectations": []any{exp(id, expect.FormatTime(due))}})
	return expect.Instant{AgentID: "a1", ExpectationID: id, Kind: expect.InstantGrace, At: due.UTC()}
}

func state(t *testing.T, rt *Runtime, id string) expect.State {
	t.Helper()
	r, err := rt.Watcher.Get(context.Background(), "a1", id)
	if err != nil {
		t.Fatal(err)
	}
	return r.State
}

func sqsEvent(bodies map[string]string) json.RawMessage {
	ev := events.SQSEvent{}
	for id, body := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, Body: body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:timers", AWSRegion: "us-east-1"})
	}
	b, _ := json.Marshal(ev)
	return b
}

func receiveAll(t *testing.T, rt *Runtime, url string) []expect.Instant {
	t.Helper()
	msgs, err := awsclient.ReceiveSQS(context.Background(), rt.SQS, url, 10, 30)
	if err != nil {
		t.Fatal(err)
	}
	var ins []expect.Instant
	for _, m := range msgs {
		var in expect.Instant
		if err := json.Unmarshal([]byte(m.Body), &in); err != nil {
			t.Fatal(err)
		}
		ins = append(ins, in)
	}
	return ins
}

// TestClockEventShapes drives the clock function's handler with each of its
// three triggers: a Scheduler fire that comes early is re-armed on the
// queue, not lost; a timer-queue batch lapses what is due, drops a body that
// is not an instant, and reports by messageId only the message that failed;
// the sweep lapses what is past due and nothing processed.
func TestClockEventShapes(t *testing.T) {
	clock := &movableClock{}
	rt, q := timerRuntime(t, clock, "")
	ctx := context.Background()

	// A Scheduler fire 40 s early: re-armed, the record untouched.
	early := raiseDue(t, rt, "early", clock.now().Add(40*time.Second))
	raw, _ := json.Marshal(early)
	if out, err := rt.HandleClockEvent(ctx, raw); err != nil || out != nil {
		t.Fatalf("early fire: %v, %v", out, err)
	}
	if s := state(t, rt, "early"); s != expect.StateOpen {
		t.Fatalf("early fire changed the record to %s", s)
	}
	// Its message is delayed: not visible now (moto's timers run on the
	// real clock, and the remainder was 40 s).
	if got := receiveAll(t, rt, q.URL); len(got) != 0 {
		t.Fatalf("the re-armed instant is visible at once: %+v", got)
	}

	// A timer-queue batch: one due, one malformed, one early by 1.5 s on
	// a runtime whose queue is gone (its re-arm fails).
	due := raiseDue(t, rt, "due", clock.now().Add(2*time.Second))
	clock.advance(3 * time.Second)
	dueBody, _ := json.Marshal(due)
	out, err := rt.HandleClockEvent(ctx, sqsEvent(map[string]string{"m-due": string(dueBody), "m-junk": `{"hello":`, "m-empty": `{}`}))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.SQSEventResponse); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failures %+v, want none (a malformed body is dropped)", resp.BatchItemFailures)
	}
	if s := state(t, rt, "due"); s != expect.StateLapsed {
		t.Fatalf("due instant from the queue: %s, want lapsed", s)
	}
	broken, _ := timerRuntime(t, clock, q.URL+"-gone")
	late := raiseDue(t, broken, "late", clock.now().Add(10*time.Second))
	lateBody, _ := json.Marshal(late)
	dueAgain, _ := json.Marshal(raiseDue(t, broken, "ok", clock.now().Add(time.Second)))
	clock.advance(2 * time.Second)
	out, err = broken.HandleClockEvent(ctx, sqsEvent(map[string]string{"m-early": string(lateBody), "m-ok": string(dueAgain)}))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(events.SQSEventResponse)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-early" {
		t.Fatalf("batch failures %+v, want only m-early", resp.BatchItemFailures)
	}
	if s := state(t, broken, "ok"); s != expect.StateLapsed {
		t.Fatalf("the batch's good message: %s, want lapsed", s)
	}

	// The sweep: an expectation whose instants nobody delivered lapses
	// once it is DefaultSweepAfter past due, not before.
	raiseDue(t, rt, "forgotten", clock.now().Add(time.Second))
	clock.advance(DefaultSweepAfter / 2)
	if _, err := rt.HandleClockEvent(ctx, json.RawMessage(`{"action":"sweep"}`)); err != nil {
		t.Fatal(err)
	}
	if s := state(t, rt, "forgotten"); s != expect.StateOpen {
		t.Fatalf("swept before SweepAfter: %s", s)
	}
	clock.advance(DefaultSweepAfter)
	// A sweep Lambda held (its asynchronous queue keeps an invocation up
	// to 6 hours) past SweepMaxAge does nothing: the next one runs.
	stale := fmt.Sprintf(`{"action":"sweep","scheduledTime":%q}`, clock.now().Add(-SweepMaxAge-time.Second).Format(time.RFC3339))
	if out, err := rt.HandleClockEvent(ctx, json.RawMessage(stale)); err != nil || out != nil {
		t.Fatalf("a stale sweep: %v %v", out, err)
	}
	if s := state(t, rt, "forgotten"); s != expect.StateOpen {
		t.Fatalf("a stale sweep ran: %s", s)
	}
	fresh := fmt.Sprintf(`{"action":"sweep","scheduledTime":%q}`, clock.now().Add(-SweepMaxAge+30*time.Second).Format(time.RFC3339))
	res, err := rt.HandleClockEvent(ctx, json.RawMessage(fresh))
	if err != nil {
		t.Fatal(err)
	}
	if s := state(t, rt, "forgotten"); s != expect.StateLapsed {
		t.Fatalf("after the sweep: %s, want lapsed (%+v)", s, res)
	}
	// "early" (due at +40 s) is not yet a minute past due.
	if got := res.(SweepResult); got.Ticked != 1 || got.Deliveries != 1 {
		t.Errorf("sweep %+v, want 1 record ticked (forgotten) and 1 late delivery handed over (due)", got)
	}
	// Nothing consumes the stream here, so the lapses wait for delivery:
	// the next sweep hands those a minute late to the queue (and lapses
	// "early", whose lapse is not late yet).
	clock.advance(2 * DefaultSweepAfter)
	res, err = rt.HandleClockEvent(ctx, json.RawMessage(`{"action":"sweep"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.(SweepResult); got.Deliveries != 2 || got.Ticked != 1 {
		t.Errorf("third sweep %+v, want early ticked and the 2 late deliveries (due, forgotten) handed over", got)
	}
	if s := state(t, rt, "early"); s != expect.StateLapsed {
		t.Fatalf("early after the third sweep: %s, want lapsed", s)
	}
	deliver := map[string]int{}
	for deadline := time.Now().Add(20 * time.Second); deliver["due"]+deliver["forgotten"] < 3 && time.Now().Before(deadline); {
		for _, in := range receiveAll(t, rt, q.URL) {
			if in.Kind == expect.InstantDeliver {
				deliver[in.ExpectationID]++
			}
		}
	}
	if deliver["due"] != 2 || deliver["forgotten"] != 1 {
		t.Errorf("delivery instants on the queue: %v, want due twice (two sweeps) and forgotten once", deliver)
	}

	// An unknown action is dropped, not retried.
	if out, err := rt.HandleClockEvent(ctx, json.RawMessage(`{"action":"reboot"}`)); out != nil || err != nil {
		t.Errorf("unknown action: %v, %v", out, err)
	}
}
