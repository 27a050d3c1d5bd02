// Package emftest reads CloudWatch Embedded Metric Format documents out of
// a function's output, checking each against the specification as
// CloudWatch Logs would before extracting its metrics, and adds up the
// values of a metric, so that tests can assert that counters moved.
package emftest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Doc is one document's metrics as CloudWatch would extract them.
type Doc struct {
	Namespace string
	// Dims are the dimension keys and values of the document's one
	// DimensionSet.
	Dims map[string]string
	// Values holds each metric's values (one for a number member).
	Values map[string][]float64
	Units  map[string]string
}

// units are the CloudWatch units the specification's schema allows.
var units = []string{"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
	"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second", "Kilobytes/Second",
	"Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second", "Megabits/Second",
	"Gigabits/Second", "Terabits/Second", "Count/Second", "None"}

// Parse returns the EMF documents among the lines of out (other lines, such
// as JSON logs without an _aws member, are skipped). A line with an _aws
// member that breaks the specification is an error naming what is wrong.
func Parse(out []byte) ([]Doc, error) {
	var docs []Doc
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if !bytes.Contains(line, []byte(`"_aws"`)) {
			continue
		}
		ds, err := ParseDocument(line)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", err, line)
		}
		docs = append(docs, ds...)
	}
	return docs, sc.Err()
}

// ParseDocument checks one document and returns the metrics of each of its
// MetricDirectives.
func ParseDocument(line []byte) ([]Doc, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(line, &root); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(root["_aws"], &meta); err != nil {
		return nil, fmt.Errorf("_aws is not an object")
	}
	for k := range meta {
		if k != "Timestamp" && k != "CloudWatchMetrics" {
			return nil, fmt.Errorf("_aws has the member %q the specification does not define", k)
		}
	}
	var ts json.Number
	if err := json.Unmarshal(meta["Timestamp"], &ts); err != nil || strings.ContainsAny(ts.String(), ".eE") {
		return nil, fmt.Errorf("_aws.Timestamp is not an integer of milliseconds: %s", meta["Timestamp"])
	}
	var directives []map[string]json.RawMessage
	if err := json.Unmarshal(meta["CloudWatchMetrics"], &directives); err != nil || directives == nil {
		return nil, fmt.Errorf("_aws.CloudWatchMetrics is not an array of MetricDirectives")
	}
	var out []Doc
	for i, d := range directives {
		for k := range d {
			if k != "Namespace" && k != "Dimensions" && k != "Metrics" {
				return nil, fmt.Errorf("CloudWatchMetrics[%d] has the member %q the specification does not define", i, k)
			}
		}
		doc := Doc{Dims: map[string]string{}, Values: map[string][]float64{}, Units: map[string]string{}}
		if err := json.Unmarshal(d["Namespace"], &doc.Namespace); err != nil || doc.Namespace == "" || len(doc.Namespace) > 1024 {
			return nil, fmt.Errorf("CloudWatchMetrics[%d].Namespace is not a string of 1 to 1024 characters", i)
		}
		var sets [][]string
		if err := json.Unmarshal(d["Dimensions"], &sets); err != nil || len(sets) == 0 {
			return nil, fmt.Errorf("CloudWatchMetrics[%d].Dimensions is not a non-empty array of DimensionSets", i)
		}
		for _, set := range sets {
			if len(set) > 30 {
				return nil, fmt.Errorf("a DimensionSet has %d keys, more than 30", len(set))
			}
			for _, k := range set {
				var v string
				if err := json.Unmarshal(root[k], &v); err != nil {
					return nil, fmt.Errorf("dimension %q is not a string member of the root", k)
				}
				if len(v) > 1024 || v == "" {
					return nil, fmt.Errorf("dimension %q has a value of %d characters", k, len(v))
				}
				doc.Dims[k] = v
			}
		}
		var defs []map[string]json.RawMessage
		if err := json.Unmarshal(d["Metrics"], &defs); err != nil {
			return nil, fmt.Errorf("CloudWatchMetrics[%d].Metrics is not an array", i)
		}
		if len(defs) > 100 {
			return nil, fmt.Errorf("CloudWatchMetrics[%d].Metrics has %d MetricDefinitions, more than 100", i, len(defs))
		}
		for _, def := range defs {
			var name, unit string
			if err := json.Unmarshal(def["Name"], &name); err != nil || name == "" {
				return nil, fmt.Errorf("a MetricDefinition has no Name")
			}
			if u, ok := def["Unit"]; ok {
				if err := json.Unmarshal(u, &unit); err != nil || !slices.Contains(units, unit) {
					return nil, fmt.Errorf("metric %q has the unit %s, not a CloudWatch unit", name, u)
				}
			}
			for k := range def {
				if k != "Name" && k != "Unit" && k != "StorageResolution" {
					return nil, fmt.Errorf("metric %q has the member %q the specification does not define", name, k)
				}
			}
			raw, ok := root[name]
			if !ok {
				return nil, fmt.Errorf("metric %q is not a member of the root", name)
			}
			var one float64
			var many []float64
			if err := json.Unmarshal(raw, &one); err == nil {
				many = []float64{one}
			} else if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
				return nil, fmt.Errorf("metric %q is neither a number nor an array of numbers: %s", name, raw)
			}
			if len(many) > 100 {
				return nil, fmt.Errorf("metric %q has %d values, more than 100", name, len(many))
			}
			doc.Values[name] = many
			doc.Units[name] = unit
		}
		out = append(out, doc)
	}
	return out, nil
}

// matches reports whether d has exactly the dimensions dims.
func (d Doc) matches(dims map[string]string) bool {
	return maps.Equal(d.Dims, dims)
}

// Sum adds up every value of the metric name under exactly the dimensions
// dims (nil: none) across docs: a counter's total, a histogram's sum.
func Sum(docs []Doc, name string, dims map[string]string) float64 {
	var s float64
	for _, d := range docs {
		if d.matches(norm(dims)) {
			for _, v := range d.Values[name] {
				s += v
			}
		}
	}
	return s
}

// Count returns how many values of the metric name were written under
// exactly the dimensions dims (nil: none): a histogram's observations.
func Count(docs []Doc, name string, dims map[string]string) int {
	n := 0
	for _, d := range docs {
		if d.matches(norm(dims)) {
			n += len(d.Values[name])
		}
	}
	return n
}

// SumAll adds up every value of the metric name whatever its dimensions.
func SumAll(docs []Doc, name string) float64 {
	var s float64
	for _, d := range docs {
		for _, v := range d.Values[name] {
			s += v
		}
	}
	return s
}

func norm(dims map[string]string) map[string]string {
	if dims == nil {
		return map[string]string{}
	}
	return dims
}
