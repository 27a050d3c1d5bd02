package timers

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestWindowEnd(t *testing.T) {
	for _, c := range []struct {
		now       string
		lookahead time.Duration
		want      string
	}{
		{"2030-01-01T00:00:00Z", 2 * time.Minute, "2030-01-01T00:02:00Z"},
		{"2030-01-01T00:00:00.000000001Z", 2 * time.Minute, "2030-01-01T00:03:00Z"},
		{"2030-01-01T00:00:30Z", 2 * time.Minute, "2030-01-01T00:03:00Z"},
		{"2030-01-01T00:00:59.999Z", 2 * time.Minute, "2030-01-01T00:03:00Z"},
		{"2030-01-01T23:59:30Z", 2 * time.Minute, "2030-01-02T00:02:00Z"},
		{"2030-01-01T00:00:10Z", 30 * time.Second, "2030-01-01T00:01:00Z"},
		{"2030-01-01T00:00:10Z", 0, "2030-01-01T00:01:00Z"},
		{"2030-01-01T00:00:00Z", 0, "2030-01-01T00:00:00Z"},
	} {
		if got := WindowEnd(at(c.now), c.lookahead); !got.Equal(at(c.want)) {
			t.Errorf("WindowEnd(%s, %s) = %s, want %s", c.now, c.lookahead, got.Format(time.RFC3339Nano), c.want)
		}
	}
}

func TestMinutesBetween(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     []string
	}{
		{"2030-01-01T00:02:00Z", "2030-01-01T00:02:00Z", nil},
		{"2030-01-01T00:02:00Z", "2030-01-01T00:01:00Z", nil},
		{"2030-01-01T00:02:00Z", "2030-01-01T00:03:00Z", []string{"2030-01-01T00:02:00Z"}},
		{"2030-01-01T00:02:00Z", "2030-01-01T00:04:30Z", []string{"2030-01-01T00:02:00Z", "2030-01-01T00:03:00Z", "2030-01-01T00:04:00Z"}},
		{"2030-01-01T23:59:00Z", "2030-01-02T00:01:00Z", []string{"2030-01-01T23:59:00Z", "2030-01-02T00:00:00Z"}},
	} {
		var got []string
		for _, m := range MinutesBetween(at(c.from), at(c.to)) {
			got = append(got, m.Format(time.RFC3339))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("MinutesBetween(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

func inst(agent, id string, kind expect.InstantKind, s string) expect.Instant {
	return expect.Instant{AgentID: agent, ExpectationID: id, Kind: kind, At: at(s)}
}

// TestMergeStep runs the merge over shards' pages (given as next instants)
// and checks the steps: a shard is refilled only when its buffer is empty,
// and expectations come out oldest first across shards.
func TestMergeStep(t *testing.T) {
	for _, c := range []struct {
		name   string
		shards [][][]string // shard -> pages -> next instants
		want   []string
	}{
		{"empty", [][][]string{{}, {}}, nil},
		{"one shard", [][][]string{{{"00:01", "00:02"}, {"00:03"}}}, []string{"00:01", "00:02", "00:03"}},
		{"interleaved pages", [][][]string{
			{{"00:01", "00:04"}, {"00:06", "00:09"}},
			{{"00:02", "00:03"}, {"00:05"}},
			{{}},
			{{"00:00"}, {"00:07", "00:08"}},
		}, []string{"00:00", "00:01", "00:02", "00:03", "00:04", "00:05", "00:06", "00:07", "00:08", "00:09"}},
		{"ties go to the lower shard", [][][]string{{{"00:01"}}, {{"00:01"}}}, []string{"00:01", "00:01"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cur := make([]cursor, len(c.shards))
			read := make([]int, len(c.shards))
			var got []string
			for steps := 0; steps < 1000; steps++ {
				shard, refill, ok := mergeStep(cur)
				if !ok {
					break
				}
				if refill {
					if len(cur[shard].buf) != 0 {
						t.Fatalf("refill of shard %d with %d buffered", shard, len(cur[shard].buf))
					}
					pages := c.shards[shard]
					var page [][]expect.Instant
					if read[shard] < len(pages) {
						for _, hm := range pages[read[shard]] {
							page = append(page, []expect.Instant{inst("a", hm, expect.InstantDue, "2030-01-01T00:"+hm+"Z")})
						}
					}
					read[shard]++
					next := ""
					if read[shard] < len(pages) {
						next = "more"
					}
					cur[shard].fill(page, next)
					continue
				}
				got = append(got, cur[shard].pop()[0].ExpectationID)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("merged %v, want %v", got, c.want)
			}
			for i, pages := range c.shards {
				if read[i] != max(1, len(pages)) {
					t.Errorf("shard %d read %d pages of %d", i, read[i], len(pages))
				}
			}
		})
	}
}

func quietTimers(fire FireFunc) *Timers {
	return New(fire, 1, slog.New(slog.NewJSONHandler(io.Discard, nil)))
}

func keys(ins []expect.Instant) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.ExpectationID+"/"+string(in.Kind))
	}
	slices.Sort(out)
	return out
}

// TestScheduleHoldsOnlyTheWindow: only instants before the limit are held
// (an expectation's later instants are left to the window's load of their
// minute, so memory is the window's, not what is open); instants already
// held stay when the limit moves.
func TestScheduleHoldsOnlyTheWindow(t *testing.T) {
	tm := quietTimers(func(context.Context, []expect.Instant) ([]expect.Instant, error) { return nil, nil })
	tm.SetLimit(at("2030-01-01T00:03:00Z"))
	ctx := context.Background()
	tm.Schedule(ctx, []expect.Instant{
		inst("a", "near", expect.InstantDue, "2030-01-01T00:01:00Z"), inst("a", "near", expect.InstantGrace, "2030-01-01T01:00:00Z"),
		inst("a", "far", expect.InstantDue, "2030-01-01T00:03:00Z"), inst("a", "far", expect.InstantGrace, "2030-01-01T00:04:00Z"),
		inst("a", "past", expect.InstantGrace, "2029-12-31T00:00:00Z"),
	})
	want := []string{"near/due", "past/grace"}
	if got := keys(tm.Pending()); !slices.Equal(got, want) {
		t.Fatalf("held %v, want %v", got, want)
	}
	// Scheduling again changes nothing.
	tm.Schedule(ctx, []expect.Instant{inst("a", "near", expect.InstantDue, "2030-01-01T00:01:00Z")})
	if tm.Len() != 2 {
		t.Fatalf("held %d after a repeat, want 2", tm.Len())
	}
	tm.SetLimit(at("2030-01-01T00:02:00Z"))
	if got := keys(tm.Pending()); !slices.Equal(got, want) {
		t.Fatalf("a lower limit dropped instants: %v", got)
	}
	tm.SetLimit(time.Time{})
	tm.Schedule(ctx, []expect.Instant{inst("a", "far", expect.InstantGrace, "2030-01-01T00:04:00Z")})
	if tm.Len() != 3 {
		t.Fatalf("no limit: held %d, want 3", tm.Len())
	}
	tm.Cancel(ctx, []expect.Instant{inst("a", "near", expect.InstantDue, "2030-01-01T00:01:00Z"), inst("a", "unknown", expect.InstantDue, "2030-01-01T00:01:00Z")})
	if tm.Len() != 2 {
		t.Fatalf("after cancel: held %d, want 2", tm.Len())
	}
}
