// Package prom is the Prometheus adapter of the metrics port: every metric
// of the catalogue (metrics.All) as a client_golang counter or histogram
// vector, and the /metrics handler that serves them in the exposition
// format. Only functions/local imports it, so no Lambda links
// client_golang (the bootstraps' size budget).
package prom

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentclock/clockwork/internal/metrics"
)

// Recorder records into Prometheus collectors. It implements
// metrics.Recorder.
type Recorder struct {
	counters   map[*metrics.Desc]*prometheus.CounterVec
	histograms map[*metrics.Desc]*prometheus.HistogramVec
	registry   *prometheus.Registry
}

// GaugeFunc exports the gauge d (a metric of kind metrics.Gauge without
// labels) as the value fn returns at each scrape. A Desc of another kind is
// ignored; registering one twice panics, as client_golang does.
func (r *Recorder) GaugeFunc(d *metrics.Desc, fn func() float64) {
	if d.Kind != metrics.Gauge || len(d.Labels) != 0 {
		return
	}
	r.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, fn))
}

// New returns a Recorder whose collectors, with the Go runtime's and the
// process's, are registered on a registry of its own (so that several
// runtimes in one test process never collide). A metric without labels is
// exported at 0 from the start, so rates and alerts see it before its
// first event.
func New() *Recorder {
	r := &Recorder{counters: map[*metrics.Desc]*prometheus.CounterVec{}, histograms: map[*metrics.Desc]*prometheus.HistogramVec{},
		registry: prometheus.NewRegistry()}
	r.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, d := range metrics.All() {
		switch d.Kind {
		case metrics.Counter:
			v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
			r.registry.MustRegister(v)
			r.counters[d] = v
			if len(d.Labels) == 0 {
				v.WithLabelValues()
			}
		case metrics.Histogram:
			v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: d.Buckets}, d.Labels)
			r.registry.MustRegister(v)
			r.histograms[d] = v
			if len(d.Labels) == 0 {
				v.WithLabelValues()
			}
		}
	}
	return r
}

// Record adds v to a counter or observes it in a histogram. A Desc outside
// the catalogue, a label count that does not match, or a negative counter
// increment is dropped.
func (r *Recorder) Record(d *metrics.Desc, v float64, labelValues ...string) {
	if len(labelValues) != len(d.Labels) {
		return
	}
	if c, ok := r.counters[d]; ok {
		if v >= 0 {
			c.WithLabelValues(labelValues...).Add(v)
		}
		return
	}
	if h, ok := r.histograms[d]; ok {
		h.WithLabelValues(labelValues...).Observe(v)
	}
}

// Registry returns the registry the metrics are registered on.
func (r *Recorder) Registry() *prometheus.Registry { return r.registry }

// Handler serves the registry in the Prometheus exposition format (text,
// or OpenMetrics when the scraper asks for it).
func (r *Recorder) Handler() http.Handler {
	return promhttp.HandlerFor(r.registry, promhttp.HandlerOpts{Registry: r.registry, EnableOpenMetrics: true})
}
