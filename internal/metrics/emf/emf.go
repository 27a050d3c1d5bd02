// Package emf is the CloudWatch adapter of the metrics port for Lambda: it
// aggregates what the services record during an invocation and writes it,
// when the invocation ends, as CloudWatch Embedded Metric Format documents
// (one JSON object per line on stdout, which Lambda sends to CloudWatch
// Logs, which extracts the metrics; no agent and no API call).
//
// Each document has the _aws metadata object (Timestamp in milliseconds,
// CloudWatchMetrics: one MetricDirective with the Namespace, one
// DimensionSet naming the labels, and the MetricDefinitions with Name and
// Unit), the label values as string members and each metric's value as a
// member of its name: a counter's sum over the invocation, or a
// histogram's observations as an array. As the specification requires, a
// document holds at most 100 metrics and an array at most 100 values;
// more are written in further documents.
package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/metrics"
)

// The specification's bounds.
const (
	// MaxMetricsPerDocument bounds a MetricDirective's Metrics.
	MaxMetricsPerDocument = 100
	// MaxValuesPerMetric bounds a metric member's array of values.
	MaxValuesPerMetric = 100
)

// DefaultNamespace is the CloudWatch namespace when none is configured.
const DefaultNamespace = "Clockwork"

type series struct {
	desc   *metrics.Desc
	values string // label values joined by \x00
}

// Recorder aggregates measurements until Flush. It implements
// metrics.Recorder and is safe for concurrent use.
type Recorder struct {
	namespace string
	now       func() time.Time

	mu     sync.Mutex
	sums   map[series]float64
	obs    map[series][]float64
	labels map[series][]string
}

// New returns a Recorder for the CloudWatch namespace ns (DefaultNamespace
// when empty).
func New(ns string) *Recorder {
	if ns == "" {
		ns = DefaultNamespace
	}
	r := &Recorder{namespace: ns, now: time.Now}
	r.reset()
	return r
}

func (r *Recorder) reset() {
	r.sums, r.obs, r.labels = map[series]float64{}, map[series][]float64{}, map[series][]string{}
}

// Record adds v to a counter's sum, or keeps v as a histogram observation.
// A label count that does not match the Desc, and a value JSON cannot hold
// (NaN, infinite), are dropped.
func (r *Recorder) Record(d *metrics.Desc, v float64, labelValues ...string) {
	if len(labelValues) != len(d.Labels) || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	k := series{d, strings.Join(labelValues, "\x00")}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.labels[k]; !ok {
		r.labels[k] = slices.Clone(labelValues)
	}
	if d.Kind == metrics.Histogram {
		r.obs[k] = append(r.obs[k], v)
	} else {
		r.sums[k] += v
	}
}

// metricDefinition is a MetricDefinition object.
type metricDefinition struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// directive is a MetricDirective object.
type directive struct {
	Namespace  string             `json:"Namespace"`
	Dimensions [][]string         `json:"Dimensions"`
	Metrics    []metricDefinition `json:"Metrics"`
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

// document is one document being filled: the members of its root node.
type document struct {
	root    map[string]any
	defs    []metricDefinition
	dimKeys []string
}

// Documents returns what was recorded since the last call as EMF
// documents, and starts afresh. Nothing recorded gives none.
func (r *Recorder) Documents() [][]byte {
	r.mu.Lock()
	sums, obs, labels := r.sums, r.obs, r.labels
	r.reset()
	r.mu.Unlock()
	if len(labels) == 0 {
		return nil
	}
	ts := r.now().UnixMilli()

	// Group the series by their dimensions (label names and values): the
	// members of one document.
	type entry struct {
		desc   *metrics.Desc
		values []float64 // a histogram's chunk
		sum    float64
	}
	groups := map[string][]entry{}
	groupLabels := map[string][2][]string{}
	keys := make([]series, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b series) int {
		return strings.Compare(a.desc.Name+"\x01"+a.values, b.desc.Name+"\x01"+b.values)
	})
	for _, k := range keys {
		g := strings.Join(k.desc.Labels, "\x00") + "\x01" + k.values
		groupLabels[g] = [2][]string{k.desc.Labels, labels[k]}
		if k.desc.Kind == metrics.Histogram {
			vs := obs[k]
			for len(vs) > 0 {
				n := min(len(vs), MaxValuesPerMetric)
				groups[g] = append(groups[g], entry{desc: k.desc, values: vs[:n]})
				vs = vs[n:]
			}
		} else {
			groups[g] = append(groups[g], entry{desc: k.desc, sum: sums[k]})
		}
	}
	gkeys := make([]string, 0, len(groups))
	for g := range groups {
		gkeys = append(gkeys, g)
	}
	slices.Sort(gkeys)

	var out [][]byte
	for _, g := range gkeys {
		names, values := groupLabels[g][0], groupLabels[g][1]
		var docs []*document
		for _, e := range groups[g] {
			// The first document of the group that has room and does not
			// hold this metric yet (a member name appears once).
			var d *document
			for _, c := range docs {
				if _, taken := c.root[e.desc.Name]; !taken && len(c.defs) < MaxMetricsPerDocument {
					d = c
					break
				}
			}
			if d == nil {
				d = &document{root: map[string]any{}, dimKeys: names}
				for i, n := range names {
					d.root[n] = values[i]
				}
				docs = append(docs, d)
			}
			if e.values != nil {
				d.root[e.desc.Name] = e.values
			} else {
				d.root[e.desc.Name] = e.sum
			}
			d.defs = append(d.defs, metricDefinition{Name: e.desc.Name, Unit: e.desc.Unit})
		}
		for _, d := range docs {
			dims := d.dimKeys
			if dims == nil {
				dims = []string{} // a DimensionSet MAY be empty
			}
			d.root["_aws"] = metadata{Timestamp: ts, CloudWatchMetrics: []directive{{
				Namespace: r.namespace, Dimensions: [][]string{dims}, Metrics: d.defs,
			}}}
			b, err := json.Marshal(d.root)
			if err != nil {
				continue // cannot happen: Record keeps finite numbers only
			}
			out = append(out, b)
		}
	}
	return out
}

// Flush writes the documents of what was recorded since the last flush to
// w, one per line (each a log event of its own), in a single write.
func (r *Recorder) Flush(w io.Writer) error {
	docs := r.Documents()
	if len(docs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, d := range docs {
		buf.Write(d)
		buf.WriteByte('\n')
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// FlushAfter wraps a Lambda handler so that the metrics an invocation
// recorded are written to w when it returns, whatever it returns: one
// flush per invocation, before Lambda may freeze the process.
func FlushAfter[In, Out any](r *Recorder, w io.Writer, h func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		defer func() { _ = r.Flush(w) }()
		return h(ctx, in)
	}
}
