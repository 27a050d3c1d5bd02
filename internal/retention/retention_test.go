package retention

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	const day = 24 * time.Hour
	for in, want := range map[string]time.Duration{"0": 0, "0s": 0, "3s": 3 * time.Second, "72h": 72 * time.Hour, "P90D": 90 * day,
		"P400D": 400 * day, "PT1M": time.Minute, "P1Y": 365 * day, "P1W": 7 * day, "P1M": 30 * day, "P1DT12H": 36 * time.Hour, "PT3S": 3 * time.Second} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1h", "P", "PT", "90", "P-1D", "P200Y", "forever", "1000000h", "PT0.5S", "P1H", "PD", "P1DT", "P99999999999999999999D"} {
		if d, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, d)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"P90D", "3s", "PT1H2M3S", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err == nil && (d < 0 || d > Max) {
			t.Fatalf("Parse(%q) = %v, outside [0, Max]", s, d)
		}
	})
}
