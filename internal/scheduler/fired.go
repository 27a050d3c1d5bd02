package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go"
)

// Fire is one schedule of the group as the local AWS mode's emulated
// Scheduler sees it: its name, its at() time and the instant it carries.
type Fire struct {
	Name    string
	At      time.Time
	Instant expect.Instant
}

// Due returns the instants of c's group's enabled schedules whose at() time
// is not after now, earliest instant first. See schedules.
func Due(ctx context.Context, c *Clock, now time.Time) ([]expect.Instant, error) {
	fires, err := c.schedules(ctx, now)
	if err != nil {
		return nil, err
	}
	out := make([]expect.Instant, 0, len(fires))
	for _, f := range fires {
		out = append(out, f.Instant)
	}
	slices.SortFunc(out, func(a, b expect.Instant) int {
		if d := a.At.Compare(b.At); d != 0 {
			return d
		}
		return strings.Compare(Name(a), Name(b))
	})
	return out, nil
}

// schedules returns the group's enabled schedules whose at() time is not
// after until, earliest at() first. It lists the group (ListSchedules,
// every page) and reads each schedule that may qualify (GetSchedule); a
// schedule whose name shows a fire time after until is not read. Schedules
// that are not this adapter's (an at() expression it cannot parse, a target
// input that is not an instant, or a name other than NameAt of that
// instant and that at() time) are left out, so that DeleteName of a
// returned name removes exactly the schedule that produced it.
//
// It serves the local AWS mode, whose emulators store schedules but never
// fire them: the caller hands each instant to the clock handler and then
// deletes its schedule. It returns an error (wrapping the SDK's) when the
// group cannot be listed or a schedule cannot be read, or for a missing
// Group; a schedule deleted between listing and reading is skipped.
func (c *Clock) schedules(ctx context.Context, until time.Time) ([]Fire, error) {
	names, err := ListNames(ctx, c, until)
	if err != nil {
		return nil, err
	}
	var out []Fire
	for _, name := range names {
		f, ok, err := ReadSchedule(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if ok && !f.At.After(until) {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b Fire) int {
		if d := a.At.Compare(b.At); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// ListNames lists the names of c's group's enabled schedules that may fire
// by until: every name but those whose fire time, as the name shows it, is
// after until. A page token that outlived the schedules it pointed at
// (deleted meanwhile: InvalidToken) restarts the listing from the first
// page, at most maxListRestarts times, names already listed kept once.
// Errors wrap the SDK's, or report a missing Group.
func ListNames(ctx context.Context, c *Clock, until time.Time) ([]string, error) {
	if err := c.checkGroup(); err != nil {
		return nil, err
	}
	until = until.UTC()
	var names []string
	seen := map[string]bool{}
	for restart := 0; ; restart++ {
		err := listNames(ctx, c, until, func(name string) {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		})
		if err == nil {
			return names, nil
		}
		if !staleToken(err) || restart >= maxListRestarts {
			return nil, err
		}
	}
}

// maxListRestarts bounds how often ListNames starts over after a stale
// page token.
const maxListRestarts = 3

// staleToken reports whether err is a refused page token: Scheduler's
// model lists ValidationException for ListSchedules (its message names the
// token), and the emulator (moto's paginator) answers InvalidToken.
func staleToken(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	code, msg := ae.ErrorCode(), strings.ToLower(ae.ErrorMessage())
	return code == "InvalidToken" || (code == "ValidationException" && strings.Contains(msg, "token"))
}

func listNames(ctx context.Context, c *Clock, until time.Time, add func(string)) error {
	p := awsscheduler.NewListSchedulesPaginator(c.client, &awsscheduler.ListSchedulesInput{
		GroupName: aws.String(c.cfg.Group),
		State:     types.ScheduleStateEnabled,
	})
	for p.HasMorePages() {
		var page *awsscheduler.ListSchedulesOutput
		err := c.call(ctx, func(ctx context.Context) error {
			var err error
			page, err = p.NextPage(ctx)
			return err
		})
		if err != nil {
			return fmt.Errorf("scheduler: list schedules of %s: %w", c.cfg.Group, err)
		}
		for _, s := range page.Schedules {
			name := aws.ToString(s.Name)
			if t, ok := nameTime(name); ok && t.After(until) {
				continue
			}
			add(name)
		}
	}
	return nil
}

// ReadSchedule reads one schedule of c's group. ok is false when it does
// not exist or is not this adapter's (see Schedules). Errors wrap the SDK's.
func ReadSchedule(ctx context.Context, c *Clock, name string) (f Fire, ok bool, err error) {
	var got *awsscheduler.GetScheduleOutput
	err = c.call(ctx, func(ctx context.Context) error {
		var err error
		got, err = c.client.GetSchedule(ctx, &awsscheduler.GetScheduleInput{
			Name:      aws.String(name),
			GroupName: aws.String(c.cfg.Group),
		})
		return err
	})
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return f, false, nil
	}
	if err != nil {
		return f, false, fmt.Errorf("scheduler: get schedule %s/%s: %w", c.cfg.Group, name, err)
	}
	at, ok := parseExpression(aws.ToString(got.ScheduleExpression), aws.ToString(got.ScheduleExpressionTimezone))
	if !ok || got.Target == nil {
		return f, false, nil
	}
	var in expect.Instant
	if err := json.Unmarshal([]byte(aws.ToString(got.Target.Input)), &in); err != nil || NameAt(in, at) != name {
		return f, false, nil
	}
	in.At = in.At.UTC()
	return Fire{Name: name, At: at, Instant: in}, true, nil
}

// DeleteName deletes one schedule of c's group by name, as Cancel does: a
// schedule that does not exist counts as deleted. The local AWS mode calls
// it after firing a schedule listed by ListNames.
func DeleteName(ctx context.Context, c *Clock, name string) error {
	if err := c.checkGroup(); err != nil {
		return err
	}
	return c.deleteName(ctx, name)
}

// nameTime reads the fire time that Name writes into a name.
func nameTime(name string) (time.Time, bool) {
	parts := strings.SplitN(name, "-", 4)
	if len(parts) != 4 || parts[0] != "cw" {
		return time.Time{}, false
	}
	t, err := time.Parse(stampLayout, parts[2])
	return t, err == nil
}
