package main

import (
	"slices"
	"strings"
	"testing"
)

// TestRetentionContext: retainExpectations and retainEvidence default to
// P90D and P400D, take Go and ISO 8601 durations and 0, and refuse
// anything else naming the key.
func TestRetentionContext(t *testing.T) {
	ctx := func(m map[string]any) func(string) (any, bool) {
		return func(k string) (any, bool) { v, ok := m[k]; return v, ok }
	}
	c, err := ConfigFromContext(ctx(nil))
	if err != nil || c.RetainExpectations != "P90D" || c.RetainEvidence != "P400D" {
		t.Fatalf("defaults %q %q, %v", c.RetainExpectations, c.RetainEvidence, err)
	}
	if c.FactLookbackMax != "PT24H" {
		t.Fatalf("factLookbackMax defaults to %q", c.FactLookbackMax)
	}
	c, err = ConfigFromContext(ctx(map[string]any{"retainExpectations": "720h", "retainEvidence": float64(0), "factLookbackMax": "P2D"}))
	if err != nil || c.RetainExpectations != "720h" || c.RetainEvidence != "0" || c.FactLookbackMax != "P2D" {
		t.Fatalf("set %q %q %q, %v", c.RetainExpectations, c.RetainEvidence, c.FactLookbackMax, err)
	}
	for _, m := range []map[string]any{{"retainExpectations": "ninety days"}, {"retainEvidence": "-1h"}, {"retainEvidence": "P200Y"}, {"factLookbackMax": "a day"}} {
		for k := range m {
			if _, err := ConfigFromContext(ctx(m)); err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%v: error %v, want one naming %s", m, err, k)
			}
		}
	}
}

// TestContextKeysNameEveryKeyRead: every context key ConfigFromContext
// asks for is in ContextKeys, which `go run ./infra -c key=value` accepts
// (retainExpectations and retainEvidence were read but refused there).
func TestContextKeysNameEveryKeyRead(t *testing.T) {
	for _, stage := range Stages {
		var asked []string
		_, err := ConfigFromContext(func(key string) (any, bool) {
			asked = append(asked, key)
			switch key {
			case "stage":
				return stage, true
			case "alarmEmail":
				return "oncall@example.com", true
			}
			return nil, false
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range asked {
			if !slices.Contains(ContextKeys, k) {
				t.Errorf("ConfigFromContext reads %q, which ContextKeys leaves out", k)
			}
		}
	}
}
