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
	"sort"
	"strconv"
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

// Documents returns what was recorded since the last call as EMF
// documents, and starts afresh. Nothing recorded gives none.
//
// The documents are written by hand rather than through reflection on
// structs: the Lambda bootstraps have a size budget, and this is all the
// JSON the format needs.
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
	// dimensions of one document. Keys sort as group, then metric name.
	byKey := make(map[string]series, len(labels))
	keys := make([]string, 0, len(labels))
	for k := range labels {
		key := strings.Join(k.desc.Labels, "\x00") + "\x01" + k.values + "\x02" + k.desc.Name
		byKey[key] = k
		keys = append(keys, key)
	}
	sort.Strings(keys)

	var out [][]byte
	var docs []*document
	group := "\x03" // none yet
	for _, key := range keys {
		k := byKey[key]
		if g := key[:strings.LastIndexByte(key, 0x02)]; g != group {
			out = appendDocs(out, docs, r.namespace, ts)
			group, docs = g, nil
		}
		vs := []float64{sums[k]}
		if k.desc.Kind == metrics.Histogram {
			vs = obs[k]
		}
		for len(vs) > 0 {
			n := min(len(vs), MaxValuesPerMetric)
			// The first document of the group with room, and without
			// this metric yet (a member name appears once).
			var d *document
			for _, c := range docs {
				if c.last != k.desc && len(c.metrics) < MaxMetricsPerDocument {
					d = c
					break
				}
			}
			if d == nil {
				d = &document{dimNames: k.desc.Labels, dimValues: labels[k]}
				docs = append(docs, d)
			}
			d.metrics = append(d.metrics, k.desc)
			d.values = append(d.values, vs[:n])
			d.last = k.desc
			vs = vs[n:]
		}
	}
	return appendDocs(out, docs, r.namespace, ts)
}

// document is one document being filled.
type document struct {
	dimNames, dimValues []string
	metrics             []*metrics.Desc
	values              [][]float64
	last                *metrics.Desc
}

func appendDocs(out [][]byte, docs []*document, namespace string, ts int64) [][]byte {
	for _, d := range docs {
		b := append(make([]byte, 0, 512), `{"_aws":{"Timestamp":`...)
		b = strconv.AppendInt(b, ts, 10)
		b = append(b, `,"CloudWatchMetrics":[{"Namespace":`...)
		b = appendString(b, namespace)
		b = append(b, `,"Dimensions":[[`...) // a DimensionSet MAY be empty
		for i, n := range d.dimNames {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n)
		}
		b = append(b, `]],"Metrics":[`...)
		for i, m := range d.metrics {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"Name":`...)
			b = appendString(b, m.Name)
			b = append(b, `,"Unit":`...)
			b = appendString(b, m.Unit)
			b = append(b, '}')
		}
		b = append(b, `]}]}`...)
		for i, n := range d.dimNames {
			b = append(b, ',')
			b = appendString(b, n)
			b = append(b, ':')
			b = appendString(b, d.dimValues[i])
		}
		for i, m := range d.metrics {
			b = append(b, ',')
			b = appendString(b, m.Name)
			b = append(b, ':')
			vs := d.values[i]
			if m.Kind != metrics.Histogram {
				b = strconv.AppendFloat(b, vs[0], 'g', -1, 64)
				continue
			}
			b = append(b, '[')
			for j, v := range vs {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, v, 'g', -1, 64)
			}
			b = append(b, ']')
		}
		out = append(out, append(b, '}'))
	}
	return out
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
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
