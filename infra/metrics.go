package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"

	"github.com/agentclock/clockwork/internal/metrics"
)

// MetricsNamespace is the CloudWatch namespace of the clockwork_ metrics
// the functions write as Embedded Metric Format (METRICS_NAMESPACE).
func MetricsNamespace(cfg Config) string { return "Clockwork/" + cfg.Name }

// ClockworkMetricWidgets returns the dashboard widgets of the service's own
// metrics (internal/metrics, written by the api, clock and stream functions
// as EMF), in rows: expectations; lapses, delivery and the change feed; the
// evaluation loop; the HTTP API. addMetricRows puts them on the service's
// dashboard. Metrics with dimensions whose values are open (routes,
// statuses, verdicts, judges) are drawn with SEARCH expressions, so that
// every value that occurs gets its line.
func ClockworkMetricWidgets(cfg Config) [][]awscloudwatch.IWidget {
	ns := MetricsNamespace(cfg)
	period := awscdk.Duration_Minutes(n(5))
	metric := func(d *metrics.Desc, stat, label string, dims map[string]string) awscloudwatch.IMetric {
		var dm *map[string]*string
		if len(dims) > 0 {
			m := map[string]*string{}
			for k, v := range dims {
				m[k] = s(v)
			}
			dm = &m
		}
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: s(ns), MetricName: s(d.Name), Statistic: s(stat), Period: period, Label: s(label), DimensionsMap: dm,
		})
	}
	search := func(d *metrics.Desc, stat, label string) awscloudwatch.IMetric {
		keys := ""
		for _, l := range d.Labels {
			keys += "," + l
		}
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression:   s(fmt.Sprintf(`SEARCH('{%s%s} MetricName="%s"', '%s', 300)`, ns, keys, d.Name, stat)),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        s(label),
			Period:       period,
		})
	}
	graph := func(title string, left []awscloudwatch.IMetric, width float64) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: s(title), Left: &left, Width: n(width), Height: n(6), Period: period,
		})
	}
	lateness := func(kind string) []awscloudwatch.IMetric {
		dims := map[string]string{"lapse": kind}
		return []awscloudwatch.IMetric{
			metric(metrics.LapseLateness, "p50", kind+" p50", dims),
			metric(metrics.LapseLateness, "p99", kind+" p99", dims),
			metric(metrics.LapseLateness, "Maximum", kind+" max", dims),
		}
	}
	return [][]awscloudwatch.IWidget{
		{
			awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{
				Markdown: s("# " + cfg.Name + ": clockwork metrics\nWritten by the api, clock and stream functions as CloudWatch Embedded Metric Format in `" + ns +
					"`; the same clockwork_ metrics as the embedded server's Prometheus /metrics (README, Metrics)."),
				Width: n(24), Height: n(2),
			}),
		},
		{
			graph("Expectations raised, withdrawn", []awscloudwatch.IMetric{
				metric(metrics.ExpectationsRaised, "Sum", "raised", nil),
				metric(metrics.ExpectationsWithdrawn, "Sum", "withdrawn", nil),
			}, 8),
			graph("Expectations satisfied (on time, late)", []awscloudwatch.IMetric{search(metrics.ExpectationsSatisfied, "Sum", "")}, 8),
			graph("Expectations lapsed, by kind", []awscloudwatch.IMetric{search(metrics.ExpectationsLapsed, "Sum", "")}, 8),
		},
		{
			graph("Items expired by TTL, by type (retention)", []awscloudwatch.IMetric{search(metrics.RecordsExpired, "Sum", "")}, 24),
		},
		{
			graph("Lapse lateness (s): lapse committed minus its instant", append(lateness("overdue"), lateness("stalled")...), 8),
			graph("Lapse task delivery", []awscloudwatch.IMetric{
				metric(metrics.DeliveryAttempts, "Sum", "attempts", nil),
				metric(metrics.DeliveryFailures, "Sum", "failures", nil),
				metric(metrics.DeadLetters, "Sum", "dead letters", nil),
				metric(metrics.SweepSkipped, "Sum", "sweep skipped", nil),
				metric(metrics.EffectsRepaired, "Sum", "effects repaired", nil),
				metric(metrics.WatchSubscribeFailures, "Sum", "watch subscriptions failed", nil),
			}, 8),
			graph("Change-feed lag (s)", []awscloudwatch.IMetric{
				metric(metrics.FeedLag, "p50", "p50", nil),
				metric(metrics.FeedLag, "p99", "p99", nil),
				metric(metrics.FeedLag, "Maximum", "max", nil),
			}, 8),
		},
		{
			graph("VERIFY by verdict; grades by verdict after the grade", []awscloudwatch.IMetric{
				search(metrics.Verifications, "Sum", ""),
				search(metrics.Grades, "Sum", ""),
			}, 8),
			graph("Judge calls and failures", []awscloudwatch.IMetric{
				search(metrics.JudgeCalls, "Sum", ""),
				search(metrics.JudgeFailures, "Sum", ""),
			}, 8),
			graph("Judge latency (s), p99", []awscloudwatch.IMetric{search(metrics.JudgeLatency, "p99", "")}, 8),
		},
		{
			graph("Notifications by channel type and outcome", []awscloudwatch.IMetric{search(metrics.Notifications, "Sum", "")}, 8),
			graph("Notifications held back by cooldowns", []awscloudwatch.IMetric{metric(metrics.NotificationsHeld, "Sum", "held", nil)}, 8),
			graph("Event to notification (s) by channel type, p99", []awscloudwatch.IMetric{search(metrics.NotificationLatency, "p99", "")}, 8),
		},
		{
			graph("HTTP requests by route and status", []awscloudwatch.IMetric{search(metrics.HTTPRequests, "Sum", "")}, 12),
			graph("HTTP latency (s) by route, p99", []awscloudwatch.IMetric{search(metrics.HTTPLatency, "p99", "")}, 12),
		},
	}
}

// addMetricRows adds the rows of ClockworkMetricWidgets to the service's
// dashboard (observability.go), below its health rows.
func (st *Stack) addMetricRows(cfg Config) {
	for _, row := range ClockworkMetricWidgets(cfg) {
		st.AddDashboardRow(row...)
	}
}
