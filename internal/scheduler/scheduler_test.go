package scheduler_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
)

var nameRE = regexp.MustCompile(`^[0-9a-zA-Z\-_.]{1,64}$`)

func TestNameDeterministicAndWithinLimits(t *testing.T) {
	long := strings.Repeat("x", expect.MaxIDLen)
	at := time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.UTC)
	paris := time.FixedZone("CET", 3600)
	cases := []struct {
		name string
		in   expect.Instant
		want string // expected prefix
	}{
		{"short", instant("agent-1", "inv-42-paid", expect.InstantDue, at), "cw-d-20261201T090001Z-"},
		{"grace", instant("agent-1", "inv-42-paid", expect.InstantGrace, at.Add(2*time.Hour)), "cw-g-20261201T110001Z-"},
		{"horizon", instant("agent-1", "inv-42-paid", expect.InstantHorizon, at.Truncate(time.Second)), "cw-h-20261201T090000Z-"},
		{"long ids", instant(long, long, expect.InstantGrace, at), "cw-g-"},
		{"unicode and separators", instant("agent/ü 1#", "exp:é\"id\"\n", expect.InstantDue, at), "cw-d-"},
		{"other time zone", instant("agent-1", "inv-42-paid", expect.InstantDue, at.In(paris)), "cw-d-20261201T090001Z-"},
		{"unknown kind", instant("a", "b", expect.InstantKind("%weird"), at), "cw-x-"},
		{"year 9999", instant("a", "b", expect.InstantDue, time.Date(9999, 12, 31, 23, 59, 59, 1, time.UTC)), "cw-d-"},
		{"epoch", instant("a", "b", expect.InstantDue, time.Unix(0, 0)), "cw-d-19700101T000000Z-"},
	}
	seen := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := scheduler.Name(c.in)
			if !nameRE.MatchString(n) || len(n) > scheduler.MaxNameLen {
				t.Fatalf("Name = %q (%d chars): not a valid schedule name", n, len(n))
			}
			if !strings.HasPrefix(n, c.want) {
				t.Errorf("Name = %q, want prefix %q", n, c.want)
			}
			if again := scheduler.Name(c.in); again != n {
				t.Errorf("Name is not deterministic: %q then %q", n, again)
			}
			if c.name != "other time zone" {
				if prev, dup := seen[n]; dup {
					t.Errorf("Name %q shared with case %q", n, prev)
				}
				seen[n] = c.name
			}
		})
	}
	// The same instant in another time zone is the same instant.
	if a, b := scheduler.Name(cases[0].in), scheduler.Name(cases[5].in); a != b {
		t.Errorf("same instant, other zone: %q != %q", a, b)
	}
	// Every field tells instants apart, even one nanosecond, and the
	// encoding of the fields is unambiguous.
	base := instant("agent-1", "exp-1", expect.InstantDue, at)
	variants := []expect.Instant{
		instant("agent-2", "exp-1", expect.InstantDue, at),
		instant("agent-1", "exp-2", expect.InstantDue, at),
		instant("agent-1", "exp-1", expect.InstantGrace, at),
		instant("agent-1", "exp-1", expect.InstantDue, at.Add(time.Nanosecond)),
		instant("agent-1-exp", "1", expect.InstantDue, at),
		instant("agent", "1-exp-1", expect.InstantDue, at),
	}
	for _, v := range variants {
		if scheduler.Name(v) == scheduler.Name(base) {
			t.Errorf("Name(%+v) == Name(%+v)", v, base)
		}
	}
}

func TestScheduleTwiceMakesOneSchedule(t *testing.T) {
	e := newEnv(t)
	c := e.clock(fixed(t0), &immediates{})
	in := instant("agent-1", "exp-1", expect.InstantGrace, t0.Add(time.Hour))
	for i := range 2 {
		if err := c.Schedule(ctxT(t), []expect.Instant{in}); err != nil {
			t.Fatalf("Schedule #%d: %v", i+1, err)
		}
	}
	if got, want := e.names(t), namesOf(in); !slices.Equal(got, want) {
		t.Fatalf("schedules = %v, want %v", got, want)
	}
	// The second call met ConflictException and took it as done.
	if n := e.counter.Count("CreateSchedule"); n != 2 {
		t.Errorf("CreateSchedule calls = %d, want 2", n)
	}
}

func TestScheduleStoresEveryField(t *testing.T) {
	e := newEnv(t)
	c := e.clock(fixed(t0), &immediates{})
	in := instant("agent-1", "inv-42-paid", expect.InstantHorizon, t0.Add(90*time.Minute+1500*time.Millisecond))
	if err := c.Schedule(ctxT(t), []expect.Instant{in}); err != nil {
		t.Fatal(err)
	}
	got, err := e.plain.GetSchedule(ctxT(t), &awsscheduler.GetScheduleInput{
		Name: aws.String(scheduler.Name(in)), GroupName: aws.String(e.group)})
	if err != nil {
		t.Fatalf("GetSchedule: %v", err)
	}
	// 04:34:06.5 rounds up to 04:34:07: never before the instant.
	checks := []struct{ field, got, want string }{
		{"Name", aws.ToString(got.Name), scheduler.Name(in)},
		{"GroupName", aws.ToString(got.GroupName), e.group},
		{"ScheduleExpression", aws.ToString(got.ScheduleExpression), "at(2030-01-02T04:34:07)"},
		{"ScheduleExpressionTimezone", aws.ToString(got.ScheduleExpressionTimezone), "UTC"},
		{"FlexibleTimeWindow.Mode", string(got.FlexibleTimeWindow.Mode), "OFF"},
		{"ActionAfterCompletion", string(got.ActionAfterCompletion), "DELETE"},
		{"State", string(got.State), "ENABLED"},
		{"Target.Arn", aws.ToString(got.Target.Arn), targetArn},
		{"Target.RoleArn", aws.ToString(got.Target.RoleArn), roleArn},
		{"Target.RetryPolicy.MaximumRetryAttempts", fmt.Sprint(aws.ToInt32(got.Target.RetryPolicy.MaximumRetryAttempts)), "7"},
		{"Target.RetryPolicy.MaximumEventAgeInSeconds", fmt.Sprint(aws.ToInt32(got.Target.RetryPolicy.MaximumEventAgeInSeconds)), "3600"},
	}
	if got.Target.DeadLetterConfig == nil {
		t.Fatal("Target.DeadLetterConfig is missing")
	}
	checks = append(checks, struct{ field, got, want string }{"Target.DeadLetterConfig.Arn", aws.ToString(got.Target.DeadLetterConfig.Arn), dlqArn})
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.field, ch.got, ch.want)
		}
	}
	var decoded expect.Instant
	if err := json.Unmarshal([]byte(aws.ToString(got.Target.Input)), &decoded); err != nil {
		t.Fatalf("Target.Input %q: %v", aws.ToString(got.Target.Input), err)
	}
	if decoded.AgentID != in.AgentID || decoded.ExpectationID != in.ExpectationID || decoded.Kind != in.Kind || !decoded.At.Equal(in.At) {
		t.Errorf("Target.Input decodes to %+v, want %+v", decoded, in)
	}
}

func TestScheduleDefaultsAndClamps(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		retries, age         int32
		wantRetries, wantAge int32
	}{
		{0, 0, 185, 86400},
		{-1, 10, 0, 60},
		{1000, 1 << 20, 185, 86400},
	}
	for i, tc := range cases {
		c := e.clock(fixed(t0), nil, func(cfg *scheduler.Config) { cfg.MaxRetries, cfg.MaxEventAge = tc.retries, tc.age })
		in := instant("agent-1", fmt.Sprint("exp-", i), expect.InstantGrace, t0.Add(time.Hour))
		if err := c.Schedule(ctxT(t), []expect.Instant{in}); err != nil {
			t.Fatal(err)
		}
		got, err := e.plain.GetSchedule(ctxT(t), &awsscheduler.GetScheduleInput{Name: aws.String(scheduler.Name(in)), GroupName: aws.String(e.group)})
		if err != nil {
			t.Fatal(err)
		}
		rp := got.Target.RetryPolicy
		if aws.ToInt32(rp.MaximumRetryAttempts) != tc.wantRetries || aws.ToInt32(rp.MaximumEventAgeInSeconds) != tc.wantAge {
			t.Errorf("MaxRetries %d, MaxEventAge %d: stored %d, %d; want %d, %d", tc.retries, tc.age,
				aws.ToInt32(rp.MaximumRetryAttempts), aws.ToInt32(rp.MaximumEventAgeInSeconds), tc.wantRetries, tc.wantAge)
		}
	}
}

func TestCancelDeletesAndIsIdempotent(t *testing.T) {
	e := newEnv(t)
	c := e.clock(fixed(t0), &immediates{})
	keep := instant("agent-1", "exp-1", expect.InstantDue, t0.Add(time.Hour))
	drop := instant("agent-1", "exp-1", expect.InstantGrace, t0.Add(3*time.Hour))
	if err := c.Schedule(ctxT(t), []expect.Instant{keep, drop}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := c.Cancel(ctxT(t), []expect.Instant{drop}); err != nil {
			t.Fatalf("Cancel #%d: %v", i+1, err)
		}
	}
	// Never scheduled, and already past: still not an error.
	if err := c.Cancel(ctxT(t), []expect.Instant{instant("agent-9", "nope", expect.InstantDue, t0.Add(-time.Hour))}); err != nil {
		t.Fatalf("Cancel of an unknown instant: %v", err)
	}
	if got, want := e.names(t), namesOf(keep); !slices.Equal(got, want) {
		t.Fatalf("schedules = %v, want %v", got, want)
	}
	if n := e.counter.Count("DeleteSchedule"); n != 3 {
		t.Errorf("DeleteSchedule calls = %d, want 3", n)
	}
	if err := c.Delete(ctxT(t), keep); err != nil {
		t.Fatal(err)
	}
	if got := e.names(t); len(got) != 0 {
		t.Fatalf("schedules left: %v", got)
	}
}

func TestPastInstantIsHandledAtOnce(t *testing.T) {
	e := newEnv(t)
	im := &immediates{}
	c := e.clock(fixed(t0), im)
	past := []expect.Instant{
		instant("agent-1", "exp-1", expect.InstantGrace, t0),                         // exactly now
		instant("agent-1", "exp-2", expect.InstantDue, t0.Add(-time.Hour)),           // past
		instant("agent-1", "exp-3", expect.InstantHorizon, t0.Add(-time.Nanosecond)), // just past
	}
	future := instant("agent-1", "exp-4", expect.InstantGrace, t0.Add(time.Nanosecond))
	if err := c.Schedule(ctxT(t), append(slices.Clone(past), future)); err != nil {
		t.Fatal(err)
	}
	if got := im.got(); len(got) != len(past) {
		t.Fatalf("Immediate got %v, want %v", got, past)
	}
	for i, in := range im.got() {
		if scheduler.Name(in) != scheduler.Name(past[i]) {
			t.Errorf("Immediate #%d got %+v, want %+v", i, in, past[i])
		}
	}
	if n := e.counter.Count("CreateSchedule"); n != 1 {
		t.Errorf("CreateSchedule calls = %d, want 1 (the future instant only)", n)
	}
	if got, want := e.names(t), namesOf(future); !slices.Equal(got, want) {
		t.Errorf("schedules = %v, want %v", got, want)
	}

	// Immediate's error is returned, wrapped; without Immediate a past
	// instant is an error, never a silent drop.
	boom := errors.New("boom")
	im.err = boom
	if err := c.Schedule(ctxT(t), past[:1]); !errors.Is(err, boom) {
		t.Errorf("Schedule with a failing Immediate = %v, want it to wrap %v", err, boom)
	}
	noImm := e.clock(fixed(t0), nil)
	if err := noImm.Schedule(ctxT(t), past[:1]); err == nil || !strings.Contains(err.Error(), "Immediate") {
		t.Errorf("Schedule without Immediate = %v, want an error naming Immediate", err)
	}
}

func TestDueReturnsOnlySchedulesWhoseTimeHasCome(t *testing.T) {
	e := newEnv(t)
	c := e.clock(fixed(t0), &immediates{})
	a := instant("agent-1", "exp-a", expect.InstantDue, t0.Add(time.Minute))
	b := instant("agent-1", "exp-b", expect.InstantGrace, t0.Add(time.Minute+500*time.Millisecond)) // fires at +1m1s
	later := instant("agent-2", "exp-c", expect.InstantHorizon, t0.Add(time.Hour))
	var many []expect.Instant // more than one page (moto pages by 50)
	for i := range 60 {
		many = append(many, instant("agent-3", fmt.Sprint("bulk-", i), expect.InstantGrace, t0.Add(2*time.Hour+time.Duration(i)*time.Second)))
	}
	if err := c.Schedule(ctxT(t), append([]expect.Instant{later, b, a}, many...)); err != nil {
		t.Fatal(err)
	}
	// A schedule that is not ours is never returned.
	if _, err := e.plain.CreateSchedule(ctxT(t), &awsscheduler.CreateScheduleInput{
		Name: aws.String("someone-else"), GroupName: aws.String(e.group),
		ScheduleExpression: aws.String("at(2000-01-01T00:00:00)"), FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		Target: &types.Target{Arn: aws.String(targetArn), RoleArn: aws.String(roleArn), Input: aws.String(`{"hello":"world"}`)},
	}); err != nil {
		t.Fatal(err)
	}

	due := func(now time.Time) []string {
		t.Helper()
		ins, err := scheduler.Due(ctxT(t), c, now)
		if err != nil {
			t.Fatalf("Due(%s): %v", now, err)
		}
		var out []string
		for _, in := range ins {
			out = append(out, scheduler.Name(in))
		}
		return out
	}
	if got := due(t0.Add(59 * time.Second)); len(got) != 0 {
		t.Errorf("Due(+59s) = %v, want none", got)
	}
	if got, want := due(t0.Add(time.Minute)), namesOf(a); !slices.Equal(got, want) {
		t.Errorf("Due(+1m) = %v, want %v", got, want)
	}
	e.counter.Reset()
	if got, want := due(t0.Add(time.Minute+time.Second)), []string{scheduler.Name(a), scheduler.Name(b)}; !slices.Equal(got, want) {
		t.Errorf("Due(+1m1s) = %v, want %v (earliest first)", got, want)
	}
	// Two pages listed; only the schedules that may be due were read (a, b
	// and the foreign one, whose name says nothing about its time).
	if n, m := e.counter.Count("ListSchedules"), e.counter.Count("GetSchedule"); n != 2 || m != 3 {
		t.Errorf("ListSchedules = %d (want 2), GetSchedule = %d (want 3)", n, m)
	}
	all, err := scheduler.Due(ctxT(t), c, t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 63 {
		t.Errorf("Due(+3h) returned %d instants, want 63", len(all))
	}
	if !slices.IsSortedFunc(all, func(x, y expect.Instant) int { return x.At.Compare(y.At) }) {
		t.Errorf("Due(+3h) is not earliest first")
	}
	for _, in := range all {
		if in.At.Location() != time.UTC {
			t.Errorf("Due returned %v, not in UTC", in.At)
		}
	}

	// The local AWS mode deletes what it fired; those are never due again.
	for _, in := range []expect.Instant{a, b} {
		if err := c.Delete(ctxT(t), in); err != nil {
			t.Fatal(err)
		}
	}
	if got := due(t0.Add(time.Minute + time.Second)); len(got) != 0 {
		t.Errorf("Due after deleting = %v, want none", got)
	}
}

func TestCreateGroupIsIdempotent(t *testing.T) {
	e := newEnv(t)
	c := e.clock(fixed(t0), &immediates{})
	in := instant("agent-1", "exp-1", expect.InstantGrace, t0.Add(time.Hour))
	if err := c.Schedule(ctxT(t), []expect.Instant{in}); err != nil {
		t.Fatal(err)
	}
	// moto's CreateScheduleGroup would replace the group and drop its
	// schedules; CreateGroup looks first and leaves it alone.
	if err := c.CreateGroup(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got, want := e.names(t), namesOf(in); !slices.Equal(got, want) {
		t.Errorf("schedules after CreateGroup = %v, want %v", got, want)
	}
	if n := e.counter.Count("CreateScheduleGroup"); n != 0 {
		t.Errorf("CreateScheduleGroup calls = %d, want 0 for an existing group", n)
	}
}

func TestCallCounterCountsOneCreatePerNewInstant(t *testing.T) {
	e := newEnv(t)
	c := e.clock(fixed(t0), &immediates{})
	var ins []expect.Instant
	for i, k := range []expect.InstantKind{expect.InstantDue, expect.InstantGrace, expect.InstantHorizon} {
		ins = append(ins, instant("agent-1", "exp-1", k, t0.Add(time.Duration(i+1)*time.Hour)))
	}
	if err := c.Schedule(ctxT(t), ins); err != nil {
		t.Fatal(err)
	}
	snap := e.counter.Snapshot()
	if snap["CreateSchedule"] != 3 || e.counter.Total() != 3 {
		t.Errorf("calls = %v, want exactly 3 CreateSchedule", snap)
	}
}

func TestConfigErrors(t *testing.T) {
	e := newEnv(t)
	in := instant("agent-1", "exp-1", expect.InstantGrace, t0.Add(time.Hour))
	noGroup := e.clock(fixed(t0), nil, func(c *scheduler.Config) { c.Group = "" })
	if err := noGroup.Schedule(ctxT(t), []expect.Instant{in}); err == nil {
		t.Error("Schedule without Group: no error")
	}
	if err := noGroup.Cancel(ctxT(t), []expect.Instant{in}); err == nil {
		t.Error("Cancel without Group: no error")
	}
	if _, err := scheduler.Due(ctxT(t), noGroup, t0); err == nil {
		t.Error("Due without Group: no error")
	}
	noTarget := e.clock(fixed(t0), nil, func(c *scheduler.Config) { c.TargetArn = "" })
	if err := noTarget.Schedule(ctxT(t), []expect.Instant{in}); err == nil {
		t.Error("Schedule without TargetArn: no error")
	}
	if e.counter.Total() != 0 {
		t.Errorf("a misconfigured Clock called AWS: %v", e.counter.Snapshot())
	}
}
