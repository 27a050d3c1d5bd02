package scheduler_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/agentclock/clockwork/internal/store/dynamo"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
)

// The Clock is the clock port's AWS adapter.
var _ feed.Scheduler = (*scheduler.Clock)(nil)

// The emulator is moto's server, which serves every AWS service it emulates
// (EventBridge Scheduler included) on one loopback port. It is the one that
// internal/store/dynamo/dynamotest starts for the DynamoDB tests
// (localstack/dynamodb-emulator.sh): one per test binary, installed into a
// cached virtualenv on first use, skipped with the reason when unavailable,
// and a failure when CI=true.
var usedMoto atomic.Bool

func TestMain(m *testing.M) {
	code := m.Run()
	if usedMoto.Load() {
		_, stop, _ := dynamotest.StartMain()
		stop()
	}
	os.Exit(code)
}

const (
	targetArn = "arn:aws:lambda:us-east-1:123456789012:function:clockwork-clock"
	roleArn   = "arn:aws:iam::123456789012:role/clockwork-scheduler"
	dlqArn    = "arn:aws:sqs:us-east-1:123456789012:clockwork-clock-dlq"
)

// t0 is the watcher's clock in most tests: moto never fires schedules nor
// checks at() times, so a fixed clock makes every test deterministic.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is one test's view of moto: a Scheduler client whose calls are
// counted, and a schedule group of its own (deleted when the test ends).
type env struct {
	client  *awsscheduler.Client // counted
	plain   *awsscheduler.Client // not counted, for the tests' own reads
	counter *dynamo.Counter
	group   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	usedMoto.Store(true)
	ep := dynamotest.Start(t)
	e := &env{counter: &dynamo.Counter{}}
	e.client = awsscheduler.NewFromConfig(dynamotest.Config(ep, dynamo.CountingMiddleware(e.counter)))
	e.plain = awsscheduler.NewFromConfig(dynamotest.Config(ep))
	var b [6]byte
	_, _ = rand.Read(b[:])
	e.group = "clockwork-test-" + hex.EncodeToString(b[:])
	if err := scheduler.New(e.client, scheduler.Config{Group: e.group}).CreateGroup(ctxT(t)); err != nil {
		t.Fatalf("CreateGroup: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.plain.DeleteScheduleGroup(ctx, &awsscheduler.DeleteScheduleGroupInput{Name: aws.String(e.group)}); err != nil {
			t.Logf("delete schedule group %s: %v", e.group, err)
		}
	})
	e.counter.Reset()
	return e
}

// immediates records the instants handed to Config.Immediate.
type immediates struct {
	mu  sync.Mutex
	ins []expect.Instant
	err error
}

func (im *immediates) fn(_ context.Context, in expect.Instant) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.ins = append(im.ins, in)
	return im.err
}

func (im *immediates) got() []expect.Instant {
	im.mu.Lock()
	defer im.mu.Unlock()
	return append([]expect.Instant(nil), im.ins...)
}

// clock returns a Clock on the env's group at the fixed time now, with
// every target setting filled in.
func (e *env) clock(now func() time.Time, im *immediates, mut ...func(*scheduler.Config)) *scheduler.Clock {
	cfg := scheduler.Config{
		Group:         e.group,
		TargetArn:     targetArn,
		RoleArn:       roleArn,
		DeadLetterArn: dlqArn,
		MaxRetries:    7,
		MaxEventAge:   3600,
		Now:           now,
	}
	if im != nil {
		cfg.Immediate = im.fn
	}
	for _, m := range mut {
		m(&cfg)
	}
	return scheduler.New(e.client, cfg)
}

// names lists the names of the group's schedules (uncounted), sorted.
func (e *env) names(t testing.TB) []string {
	t.Helper()
	var out []string
	p := awsscheduler.NewListSchedulesPaginator(e.plain, &awsscheduler.ListSchedulesInput{GroupName: aws.String(e.group)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatalf("ListSchedules: %v", err)
		}
		for _, s := range page.Schedules {
			out = append(out, aws.ToString(s.Name))
		}
	}
	sort.Strings(out)
	return out
}

func instant(agent, id string, kind expect.InstantKind, at time.Time) expect.Instant {
	return expect.Instant{AgentID: agent, ExpectationID: id, Kind: kind, At: at}
}

func namesOf(ins ...expect.Instant) []string {
	var out []string
	for _, in := range ins {
		out = append(out, scheduler.Name(in))
	}
	sort.Strings(out)
	return out
}

func fixed(t time.Time) func() time.Time { return func() time.Time { return t } }
