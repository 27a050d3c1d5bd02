package scheduler_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

func TestQueueDelayNeverArrivesEarly(t *testing.T) {
	cases := []struct {
		wait time.Duration
		want int32
	}{
		{-time.Second, 0}, {0, 0}, {time.Nanosecond, 1}, {999 * time.Millisecond, 1}, {time.Second, 1},
		{time.Second + time.Millisecond, 2}, {59*time.Second + 500*time.Millisecond, 60},
		{scheduler.MaxQueueDelay - time.Millisecond, 900}, {scheduler.MaxQueueDelay, 900}, {time.Hour, 900},
	}
	for _, c := range cases {
		if got := scheduler.QueueDelay(t0.Add(c.wait), t0); got != c.want {
			t.Errorf("QueueDelay(wait %s) = %d, want %d", c.wait, got, c.want)
		}
		if got := time.Duration(scheduler.QueueDelay(t0.Add(c.wait), t0)) * time.Second; c.wait > 0 && c.wait <= scheduler.MaxQueueDelay && got < c.wait {
			t.Errorf("QueueDelay(wait %s) = %s: the message would arrive before the instant", c.wait, got)
		}
	}
}

// TestFireTimeComesBeforeTheInstantWhateverScheduler checks the design's
// premise: a schedule set for FireTime fires before its instant even when
// Scheduler fires anywhere from a whole period less a second early to a
// whole period late.
func TestFireTimeComesBeforeTheInstantWhateverScheduler(t *testing.T) {
	for _, p := range []time.Duration{time.Second, 2 * time.Second, time.Minute} {
		c := scheduler.New(nil, scheduler.Config{Group: "g", QueueURL: "q", Precision: p})
		for _, off := range []time.Duration{0, time.Nanosecond, time.Millisecond, 500 * time.Millisecond, p / 2, p - time.Nanosecond, p, 3*p + 7*time.Millisecond} {
			in := instant("a", "e", expect.InstantGrace, t0.Truncate(time.Minute).Add(off))
			f := c.FireTime(in)
			if f.Truncate(time.Second) != f || f.Truncate(p) != f {
				t.Errorf("p=%s at=%s: FireTime %s is not on a period boundary", p, in.At, f)
			}
			if latest := f.Add(p); latest.After(in.At) {
				t.Errorf("p=%s at=%s: FireTime %s may fire after the instant (latest %s)", p, in.At, f, latest)
			}
			if earliest := f.Add(-(p - time.Second)); in.At.Sub(earliest) > 3*p {
				t.Errorf("p=%s at=%s: FireTime %s leaves more than three periods to wait", p, in.At, f)
			}
		}
	}
	legacy := scheduler.New(nil, scheduler.Config{Group: "g"})
	in := instant("a", "e", expect.InstantGrace, t0.Add(1500*time.Millisecond))
	if got, want := legacy.FireTime(in), t0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("without a queue FireTime = %s, want the instant rounded up to the second %s", got, want)
	}
}

// queueEnv adds a timer queue on the emulator to an env.
type queueEnv struct {
	*env
	sqs      *sqs.Client // the test's own reads
	endpoint string
	url      string
}

func newQueueEnv(t *testing.T) *queueEnv {
	t.Helper()
	e := newEnv(t)
	ep := dynamotest.Start(t)
	q := &queueEnv{env: e, sqs: sqs.NewFromConfig(dynamotest.Config(ep)), endpoint: ep}
	out, err := q.sqs.CreateQueue(ctxT(t), &sqs.CreateQueueInput{QueueName: aws.String(e.group + "-timers")})
	if err != nil {
		t.Fatal(err)
	}
	q.url = aws.ToString(out.QueueUrl)
	e.counter.Reset()
	return q
}

func (q *queueEnv) clock(now func() time.Time, im *immediates, mut ...func(*scheduler.Config)) *scheduler.Clock {
	return q.env.clock(now, im, append([]func(*scheduler.Config){func(c *scheduler.Config) {
		c.SQS, c.QueueURL = awsclient.NewSQSSender(dynamotest.Config(q.endpoint)), q.url
	}}, mut...)...)
}

// messages receives every message on the queue now visible, with its
// instant and the timer it was sent with (moto keeps it as an attribute
// only through the receive's timing, so the test checks visibility).
func (q *queueEnv) visible(t *testing.T) []expect.Instant {
	t.Helper()
	var out []expect.Instant
	for {
		got, err := q.sqs.ReceiveMessage(ctxT(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) == 0 {
			return out
		}
		for _, m := range got.Messages {
			var in expect.Instant
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &in); err != nil {
				t.Fatalf("message body %q: %v", aws.ToString(m.Body), err)
			}
			out = append(out, in)
		}
	}
}

func (q *queueEnv) depth(t *testing.T) (visible, delayed int) {
	t.Helper()
	got, err := q.sqs.GetQueueAttributes(ctxT(t), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ = strconv.Atoi(got.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	delayed, _ = strconv.Atoi(got.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)])
	return visible, delayed
}

// TestScheduleWithQueueRoutesByDistance: an instant within DirectWindow goes
// on the queue with a message timer and gets no schedule; one further away
// gets a schedule set for the period before its own; one too near for such a
// schedule goes on the queue even when DirectWindow is off.
func TestScheduleWithQueueRoutesByDistance(t *testing.T) {
	q := newQueueEnv(t)
	now := time.Now().UTC() // moto's message timers run on the real clock
	c := q.clock(func() time.Time { return now }, &immediates{}, func(c *scheduler.Config) { c.DirectWindow = 10 * time.Minute })
	near := instant("agent-1", "near", expect.InstantDue, now.Add(10*time.Minute))
	far := instant("agent-1", "far", expect.InstantGrace, now.Add(10*time.Minute+time.Second))
	if err := c.Schedule(ctxT(t), []expect.Instant{near, far}); err != nil {
		t.Fatal(err)
	}
	if m := q.counter.Count("CreateSchedule"); m != 1 {
		t.Fatalf("CreateSchedule %d, want one (the far instant's; %v)", m, q.counter.Snapshot())
	}
	if got, want := q.names(t), []string{scheduler.NameAt(far, c.FireTime(far))}; !slices.Equal(got, want) {
		t.Fatalf("schedules = %v, want %v", got, want)
	}
	got, err := q.plain.GetSchedule(ctxT(t), &awsscheduler.GetScheduleInput{Name: aws.String(scheduler.NameAt(far, c.FireTime(far))), GroupName: aws.String(q.group)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "at(" + far.At.Truncate(time.Minute).Add(-time.Minute).Format("2006-01-02T15:04:05") + ")"; aws.ToString(got.ScheduleExpression) != want {
		t.Errorf("far's schedule %s, want %s: the minute before the instant's", aws.ToString(got.ScheduleExpression), want)
	}
	// (At least once: the SDK may have retried a send whose answer was
	// lost, which is why every consumer is idempotent.)
	if v, d := q.depth(t); v != 0 || d < 1 {
		t.Errorf("queue: %d visible, %d delayed; want the near instant delayed", v, d)
	}

	// Cancel deletes the schedule it made (by the same name).
	if err := c.Cancel(ctxT(t), []expect.Instant{near, far}); err != nil {
		t.Fatal(err)
	}
	if got := q.names(t); len(got) != 0 {
		t.Errorf("schedules left after Cancel: %v", got)
	}

	// DirectWindow off: an instant that leaves less than a period before
	// its schedule would fire goes on the queue all the same.
	q.counter.Reset()
	_, before := q.depth(t)
	off := q.clock(func() time.Time { return now }, &immediates{}, func(c *scheduler.Config) { c.DirectWindow = -1 })
	soon := instant("agent-1", "soon", expect.InstantGrace, now.Add(90*time.Second))
	later := instant("agent-1", "later", expect.InstantGrace, now.Add(3*time.Minute))
	if err := off.Schedule(ctxT(t), []expect.Instant{soon, later}); err != nil {
		t.Fatal(err)
	}
	if _, after := q.depth(t); after <= before {
		t.Errorf("delayed messages %d before, %d after: the near instant was not sent", before, after)
	}
	if m := q.counter.Count("CreateSchedule"); m != 1 {
		t.Errorf("CreateSchedule %d, want one (the later instant's; %v)", m, q.counter.Snapshot())
	}
}

// TestRearmSendsTheRemainder: a re-armed instant is invisible until its
// time (moto's message timers run on the real clock), then visible exactly
// once with the same instant; one whose time has come is visible at once.
func TestRearmSendsTheRemainder(t *testing.T) {
	q := newQueueEnv(t)
	c := q.clock(time.Now, &immediates{})
	soon := instant("agent-1", "soon", expect.InstantGrace, time.Now().Add(1200*time.Millisecond).UTC())
	past := instant("agent-1", "past", expect.InstantDeliver, time.Now().Add(-time.Minute).UTC())
	if err := c.Rearm(ctxT(t), soon); err != nil {
		t.Fatal(err)
	}
	if err := c.Enqueue(ctxT(t), []expect.Instant{past}); err != nil {
		t.Fatal(err)
	}
	if got := q.visible(t); len(got) != 1 || got[0] != past {
		t.Fatalf("visible at once: %+v, want only %+v", got, past)
	}
	var got []expect.Instant
	for deadline := time.Now().Add(20 * time.Second); len(got) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		got = q.visible(t)
	}
	if len(got) != 1 || got[0] != soon {
		t.Fatalf("after its timer: %+v, want %+v", got, soon)
	}
	if arrived := time.Now(); arrived.Before(soon.At) {
		t.Errorf("the re-armed instant arrived at %s, before its time %s", arrived, soon.At)
	}

	// SQS's own error comes back, with its code.
	gone := q.clock(time.Now, &immediates{}, func(c *scheduler.Config) { c.QueueURL = q.url + "-gone" })
	var api smithy.APIError
	if err := gone.Rearm(ctxT(t), soon); !errors.As(err, &api) || !strings.Contains(api.ErrorCode(), "NonExistentQueue") && api.ErrorCode() != "QueueDoesNotExist" {
		t.Errorf("Rearm to a missing queue = %v, want SQS's QueueDoesNotExist", err)
	}

	noQueue := q.env.clock(time.Now, &immediates{})
	if err := noQueue.Rearm(ctxT(t), soon); !errors.Is(err, scheduler.ErrNoQueue) {
		t.Errorf("Rearm without a queue = %v, want ErrNoQueue", err)
	}
}
