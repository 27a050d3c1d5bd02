package review

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestKappaAgreesWithLibraries checks CohenKappa against scikit-learn's
// cohen_kappa_score and FleissKappa against statsmodels' fleiss_kappa on
// random tables (and the degenerate ones), in the pinned virtualenv of
// testdata/requirements.txt. It fails, never skips, when CI is set.
func TestKappaAgreesWithLibraries(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("installs scikit-learn and statsmodels; run without -short")
	}
	py, err := exec.Command("bash", "../../scripts/pyvenv.sh", "review-kappa", "testdata/requirements.txt", "3.10", "import sklearn, statsmodels").Output()
	if err != nil {
		msg := "the kappa libraries' virtualenv could not be built: " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	r := rand.New(rand.NewPCG(7, 39))
	type table struct {
		X, Y   []int   `json:",omitempty"`
		Fleiss [][]int `json:",omitempty"` // per item: [fails, passes]
	}
	var cohen [][2][]bool
	var fleiss [][][]bool
	var tables []table
	for i := range 60 {
		n := 2 + r.IntN(60)
		bias := r.Float64()
		if i < 30 {
			x, y := make([]bool, n), make([]bool, n)
			for j := range n {
				x[j] = r.Float64() < bias
				y[j] = x[j]
				if r.Float64() < 0.3 {
					y[j] = r.Float64() < 0.5
				}
			}
			cohen = append(cohen, [2][]bool{x, y})
			tables = append(tables, table{X: ints(x), Y: ints(y)})
			continue
		}
		m := 3 + r.IntN(3)
		items := make([][]bool, n)
		counts := make([][]int, n)
		for j := range n {
			items[j] = make([]bool, m)
			k := 0
			for l := range m {
				items[j][l] = r.Float64() < bias
				if items[j][l] {
					k++
				}
			}
			counts[j] = []int{m - k, k}
		}
		fleiss = append(fleiss, items)
		tables = append(tables, table{Fleiss: counts})
	}
	in, _ := json.Marshal(tables)
	const script = `
import json, sys, warnings
import numpy as np
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa
warnings.simplefilter("ignore")
out = []
for t in json.load(sys.stdin):
    if t.get("X") is not None:
        k = cohen_kappa_score(t["X"], t["Y"], labels=[0, 1])
    else:
        k = fleiss_kappa(np.array(t["Fleiss"]), method="fleiss")
    out.append(None if k != k else float(k))
print(json.dumps(out))
`
	cmd := exec.Command(strings.TrimSpace(string(py)), "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var want []*float64
	if err := json.Unmarshal(outb, &want); err != nil {
		t.Fatalf("python answered %s: %v", outb, err)
	}
	check := func(i int, got *float64) {
		switch {
		case want[i] == nil && got == nil:
		case want[i] == nil || got == nil:
			t.Errorf("table %d: kappa %v, library %v", i, deref(got), deref(want[i]))
		case math.Abs(*want[i]-*got) > 1e-5:
			t.Errorf("table %d: kappa %v, library %v", i, *got, *want[i])
		}
	}
	for i, c := range cohen {
		k, _ := CohenKappa(c[0], c[1])
		check(i, k)
	}
	for i, f := range fleiss {
		k, _ := FleissKappa(f)
		check(len(cohen)+i, k)
	}
}

func ints(bs []bool) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		if b {
			out[i] = 1
		}
	}
	return out
}
