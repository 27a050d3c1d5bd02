package scheduler_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

// fakeScheduler answers Scheduler's REST-JSON API on loopback with a
// scripted sequence of errors, then success; moto never throttles.
type fakeScheduler struct {
	mu      sync.Mutex
	script  []string // error types to answer, in order; "" = success
	methods []string
}

func (f *fakeScheduler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	f.mu.Lock()
	f.methods = append(f.methods, r.Method)
	var kind string
	if len(f.script) > 0 {
		kind, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	status := map[string]int{
		"":                              200,
		"ThrottlingException":           429,
		"ConflictException":             409,
		"ResourceNotFoundException":     404,
		"ValidationException":           400,
		"InternalServerException":       500,
		"ServiceQuotaExceededException": 402,
	}[kind]
	if kind != "" {
		w.Header().Set("X-Amzn-Errortype", kind)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"Message":"scripted `+kind+`"}`)
		return
	}
	_, _ = io.WriteString(w, `{"ScheduleArn":"arn:aws:scheduler:us-east-1:123456789012:schedule/g/n"}`)
}

func (f *fakeScheduler) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.methods)
}

// fakeClock returns a Clock whose SDK client makes a single attempt per
// call, so that the adapter's own throttling loop is what is measured.
func fakeClock(t *testing.T, f *fakeScheduler, attempts int, im *immediates) *scheduler.Clock {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	client := awsscheduler.NewFromConfig(aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1,
	})
	cfg := scheduler.Config{Group: "g", TargetArn: targetArn, RoleArn: roleArn, DeadLetterArn: dlqArn,
		Now: fixed(t0), ThrottleAttempts: attempts, ThrottleBackoff: time.Millisecond}
	if im != nil {
		cfg.Immediate = im.fn
	}
	return scheduler.New(client, cfg)
}

func TestThrottlingIsRetriedWithinBounds(t *testing.T) {
	in := instant("agent-1", "exp-1", expect.InstantGrace, t0.Add(time.Hour))
	ins := []expect.Instant{in}

	f := &fakeScheduler{script: []string{"ThrottlingException", "ThrottlingException", "ThrottlingException"}}
	if err := fakeClock(t, f, 3, nil).Schedule(ctxT(t), ins); err != nil {
		t.Fatalf("Schedule after 3 throttles: %v", err)
	}
	if f.calls() != 4 {
		t.Errorf("calls = %d, want 4", f.calls())
	}

	f = &fakeScheduler{script: strings.Split(strings.Repeat("ThrottlingException,", 10), ",")[:10]}
	err := fakeClock(t, f, 2, nil).Schedule(ctxT(t), ins)
	var te *types.ThrottlingException
	if !errors.As(err, &te) {
		t.Fatalf("Schedule while throttled = %v, want a ThrottlingException", err)
	}
	if f.calls() != 3 {
		t.Errorf("calls = %d, want 3 (1 + ThrottleAttempts)", f.calls())
	}

	f = &fakeScheduler{script: []string{"ThrottlingException", "ResourceNotFoundException"}}
	if err := fakeClock(t, f, 3, nil).Cancel(ctxT(t), ins); err != nil {
		t.Fatalf("Cancel throttled, then not found: %v", err)
	}
	if f.calls() != 2 || f.methods[0] != http.MethodDelete {
		t.Errorf("calls = %v, want 2 DELETEs", f.methods)
	}
}

func TestErrorsThatAreNotThrottlingAreNotRetriedByTheAdapter(t *testing.T) {
	in := instant("agent-1", "exp-1", expect.InstantGrace, t0.Add(time.Hour))
	for _, kind := range []string{"ValidationException", "InternalServerException", "ServiceQuotaExceededException"} {
		f := &fakeScheduler{script: []string{kind}}
		err := fakeClock(t, f, 5, nil).Schedule(ctxT(t), []expect.Instant{in})
		if err == nil || !strings.Contains(err.Error(), kind) {
			t.Errorf("%s: Schedule = %v, want that error", kind, err)
		}
		if f.calls() != 1 {
			t.Errorf("%s: calls = %d, want 1", kind, f.calls())
		}
	}
	// ConflictException means the schedule exists: done.
	f := &fakeScheduler{script: []string{"ConflictException"}}
	if err := fakeClock(t, f, 5, nil).Schedule(ctxT(t), []expect.Instant{in}); err != nil {
		t.Errorf("Conflict: %v", err)
	}
}
