package assertion

// How the assertion language compares and describes values: numbers as
// float64, JSON values by their normal form, and the names of types and calls
// in error messages.

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
)

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	if _, ok := toFloat(v); ok {
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// describeCall renders call(args...) with JSON arguments for messages.
func describeCall(call string, args []any) string {
	var b strings.Builder
	b.WriteString(call)
	b.WriteByte('(')
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		j, err := json.Marshal(normalize(a))
		if err != nil {
			fmt.Fprintf(&b, "%v", a)
			continue
		}
		b.Write(j)
	}
	b.WriteByte(')')
	return b.String()
}

// toFloat returns v as a float64 when it is a Go number.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float32:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// equalJSON compares an evaluated argument a with a normalised observation
// argument b by JSON value, without allocating on the common paths.
func equalJSON(a, b any) bool {
	switch y := b.(type) {
	case string:
		x, ok := a.(string)
		return ok && x == y
	case float64:
		x, ok := toFloat(a)
		return ok && x == y
	case bool:
		x, ok := a.(bool)
		return ok && x == y
	case nil:
		return a == nil
	case []any:
		x, ok := normalize(a).([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		x, ok := normalize(a).(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, yv := range y {
			xv, ok := x[k]
			if !ok || !equalJSON(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// normalize returns v in the form encoding/json decodes into an any:
// float64, string, bool, nil, []any and map[string]any. Values of other
// types go through a JSON round trip; a value that cannot be encoded (a
// channel, NaN) becomes its fmt %v string so that normalize never fails.
func normalize(v any) any {
	switch x := v.(type) {
	case nil, string, bool:
		return x
	case float64:
		return x
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	if f, ok := toFloat(v); ok {
		return f
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Float32 || rv.Kind() == reflect.Float64 {
		if f := rv.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("%v", f)
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return out
}
