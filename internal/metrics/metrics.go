// Package metrics is the one small measurement port of the services: a
// Recorder that counts events and observes durations, and the catalogue of
// every metric clockwork records (names starting with clockwork_, their
// labels, units and help). The services call it where an event happens,
// after the commit that makes it true; the adapters publish it:
// internal/metrics/prom as Prometheus metrics on the embedded default,
// internal/metrics/emf as CloudWatch Embedded Metric Format documents on
// Lambda. This package has no dependency, so every Lambda can link it.
package metrics

// Kind is how a metric aggregates.
type Kind int

// The kinds of metric.
const (
	// Counter adds up the values recorded (each is usually 1).
	Counter Kind = iota + 1
	// Histogram keeps the distribution of the values recorded.
	Histogram
	// Gauge is a value read when the metric is collected (the adapter
	// asks a function registered for it; Record is ignored).
	Gauge
)

// Desc describes one metric. Its label values are given in Labels order
// at each Record; every label is bounded (a route template, a status code,
// a lapse kind), never an id.
type Desc struct {
	// Name starts with clockwork_; counters end in _total and durations in
	// _seconds, as Prometheus names them. CloudWatch shows the same name.
	Name string
	Help string
	Kind Kind
	// Unit is the CloudWatch unit of the values ("Count", "Seconds").
	Unit string
	// Labels name the dimensions.
	Labels []string
	// Buckets are the histogram's upper bounds in seconds (Prometheus).
	Buckets []float64
	// EmbeddedOnly metrics measure what only the embedded runtime does;
	// the AWS dashboard does not draw them.
	EmbeddedOnly bool
}

// Recorder records measurements. Implementations are safe for concurrent
// use, never block on I/O and never fail the caller: a label count that
// does not match the Desc is dropped.
type Recorder interface {
	// Record adds v to a counter, or observes v in a histogram, under the
	// label values given in d.Labels order.
	Record(d *Desc, v float64, labelValues ...string)
}

type nop struct{}

func (nop) Record(*Desc, float64, ...string) {}

// Nop is the Recorder that records nothing: the default of every service.
var Nop Recorder = nop{}

// Or returns r, or Nop when r is nil.
func Or(r Recorder) Recorder {
	if r == nil {
		return Nop
	}
	return r
}

// latencyBuckets suit requests and model calls: 1 ms to 30 s.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// latenessBuckets suit lapse lateness and feed lag: 1 ms to 10 min.
var latenessBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}

// The label values of the watcher's metrics.
const (
	OnTime = "on_time"
	Late   = "late"
)

// The metrics of the watcher (internal/watcher), counted when the commit
// that makes each transition succeeds, so a retried or replayed operation
// counts once.
var (
	ExpectationsRaised = &Desc{Name: "clockwork_expectations_raised_total", Kind: Counter, Unit: "Count",
		Help: "Expectations raised (a supersede counts as a raise and a withdrawal)."}
	ExpectationsSatisfied = &Desc{Name: "clockwork_expectations_satisfied_total", Kind: Counter, Unit: "Count", Labels: []string{"timing"},
		Help: "Expectations that recorded a satisfying fact, by timing: on_time (observed by the due time) or late (after it, a lapsed expectation's late fact included)."}
	ExpectationsLapsed = &Desc{Name: "clockwork_expectations_lapsed_total", Kind: Counter, Unit: "Count", Labels: []string{"lapse"},
		Help: "Expectations that lapsed, by lapse kind (overdue, stalled, skipped)."}
	ExpectationsWithdrawn = &Desc{Name: "clockwork_expectations_withdrawn_total", Kind: Counter, Unit: "Count",
		Help: "Expectations withdrawn (by the agent, by a supersede, or by their origin task's cancellation)."}
	LapseLateness = &Desc{Name: "clockwork_lapse_lateness_seconds", Kind: Histogram, Unit: "Seconds", Labels: []string{"lapse"}, Buckets: latenessBuckets,
		Help: "Time from an overdue or stalled lapse's instant (grace end, horizon) to the commit of the lapse."}
)

// The metrics of lapse delivery (internal/outbox), counted when the
// attempt's outcome is committed on the record.
var (
	DeliveryAttempts = &Desc{Name: "clockwork_delivery_attempts_total", Kind: Counter, Unit: "Count",
		Help: "Lapse task delivery attempts recorded (delivered or failed)."}
	DeliveryFailures = &Desc{Name: "clockwork_delivery_failures_total", Kind: Counter, Unit: "Count",
		Help: "Lapse task delivery attempts that failed (the agent refused, answered an error, or could not be reached)."}
	DeadLetters = &Desc{Name: "clockwork_dead_letters_total", Kind: Counter, Unit: "Count",
		Help: "Lapse tasks moved to the dead letters (attempts exhausted, or refused for good)."}
)

// The metrics of alert notifications (internal/notify), by channel type
// (webhook, slack, pagerduty, email, eventbridge, otlp), counted when each
// attempt's outcome is committed on the notification.
var (
	Notifications = &Desc{Name: "clockwork_notifications_total", Kind: Counter, Unit: "Count", Labels: []string{"channel_type", "outcome"},
		Help: "Notification attempts recorded, by channel type and outcome (delivered, failed, dead)."}
	NotificationsHeld = &Desc{Name: "clockwork_notifications_held_total", Kind: Counter, Unit: "Count",
		Help: "Events a rule's cooldown held back (the next notification of the rule says how many)."}
	NotificationLatency = &Desc{Name: "clockwork_notification_latency_seconds", Kind: Histogram, Unit: "Seconds", Labels: []string{"channel_type"}, Buckets: latenessBuckets,
		Help: "Time from the event (a lapse, a recovery, a dead lapse task, a failed VERIFY) to its notification's delivery, by channel type."}
)

// The metrics of the change feed (internal/feed).
var (
	FeedLag = &Desc{Name: "clockwork_feed_lag_seconds", Kind: Histogram, Unit: "Seconds", Buckets: latenessBuckets,
		Help: "Time from a change's commit to its processing by the change-feed processor (on AWS the stream record's creation time, which has one-second precision)."}
	SweepSkipped = &Desc{Name: "clockwork_sweep_skipped_total", Kind: Counter, Unit: "Count",
		Help: "Records the AWS clock's sweep could not process (an indexed item that is not a record, a chunk of ticks that kept failing), reported and left to the next run instead of aborting it."}
	EffectsRepaired = &Desc{Name: "clockwork_effects_repaired_total", Kind: Counter, Unit: "Count",
		Help: "Changes whose effects (VERIFY, alerts, re-anchoring) the sweep redid from their pending marker because the change feed had not done them within the margin (on AWS: a stream record discarded, or still failing)."}
	RecordsExpired = &Desc{Name: "clockwork_records_expired_total", Kind: Counter, Unit: "Count", Labels: []string{"type"},
		Help: "Items deleted because their retention ended (-retain-expectations, -retain-evidence), by item type (expectation, subject, notification, execution, event, verification, anticipation, lookup, ...); on AWS, DynamoDB TTL's deletions as the stream function sees them."}
	StoreFileBytes = &Desc{Name: "clockwork_store_file_bytes", Kind: Gauge, Unit: "Bytes", EmbeddedOnly: true,
		Help: "Size of the embedded store's data file (clockwork.db)."}
	WatchSubscribeFailures = &Desc{Name: "clockwork_watch_subscribe_failures_total", Kind: Counter, Unit: "Count",
		Help: "Watched tasks whose agent refused or did not answer the push subscription (the expectation is then decided by asking the agent at its instants)."}
	FeedSetAside = &Desc{Name: "clockwork_feed_changes_set_aside_total", Kind: Counter, Unit: "Count", EmbeddedOnly: true,
		Help: "Changes the embedded change feed could not apply after its bounded retries and set aside (kept with the reason) so the changes behind them go on; the timers' sweep still finds their instants."}
)

// The metrics of the evaluation loop (internal/evaluation, internal/judge).
var (
	Verifications = &Desc{Name: "clockwork_verifications_total", Kind: Counter, Unit: "Count", Labels: []string{"verdict"},
		Help: "VERIFY messages created, by verdict (PASS, FAIL, PENDING)."}
	Grades = &Desc{Name: "clockwork_grades_total", Kind: Counter, Unit: "Count", Labels: []string{"verdict"},
		Help: "Grades submitted to a VERIFY, by the verdict after the grade."}
	JudgeCalls = &Desc{Name: "clockwork_judge_calls_total", Kind: Counter, Unit: "Count", Labels: []string{"judge"},
		Help: "Criteria sent to the model judge, by kind of judge (http, openai, bedrock)."}
	JudgeFailures = &Desc{Name: "clockwork_judge_failures_total", Kind: Counter, Unit: "Count", Labels: []string{"judge"},
		Help: "Judge calls that returned no grade (the criterion stays PENDING)."}
	JudgeLatency = &Desc{Name: "clockwork_judge_duration_seconds", Kind: Histogram, Unit: "Seconds", Labels: []string{"judge"}, Buckets: latencyBuckets,
		Help: "Time of one criterion's grading by the judge, retries included."}
)

// The metrics of the HTTP API (internal/httpapi). route is the route
// template ("POST /v1/agents/{agentId}/expectations"), never the raw path,
// and "unmatched" for a request no route serves.
var (
	HTTPRequests = &Desc{Name: "clockwork_http_requests_total", Kind: Counter, Unit: "Count", Labels: []string{"route", "status"},
		Help: "HTTP requests served, by route template and status code."}
	HTTPLatency = &Desc{Name: "clockwork_http_request_duration_seconds", Kind: Histogram, Unit: "Seconds", Labels: []string{"route"}, Buckets: latencyBuckets,
		Help: "Time to serve an HTTP request, by route template."}
)

// All returns every metric of the catalogue, in a stable order.
func All() []*Desc {
	return []*Desc{
		ExpectationsRaised, ExpectationsSatisfied, ExpectationsLapsed, ExpectationsWithdrawn, LapseLateness,
		DeliveryAttempts, DeliveryFailures, DeadLetters, Notifications, NotificationsHeld, NotificationLatency, FeedLag, FeedSetAside, SweepSkipped, EffectsRepaired, WatchSubscribeFailures,
		RecordsExpired, StoreFileBytes,
		Verifications, Grades, JudgeCalls, JudgeFailures, JudgeLatency,
		HTTPRequests, HTTPLatency,
	}
}
