package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// recommendedFlags reads the feature flags `cdk init` sets for the
// aws-cdk-lib in use (recommended-feature-flags.json of the jsii bundle the
// Go module carries).
func recommendedFlags(t *testing.T) map[string]any {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/aws/aws-cdk-go/awscdk/v2").Output()
	if err != nil {
		t.Fatalf("locating aws-cdk-go: %v", err)
	}
	tgzs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(dir)), "jsii", "aws-cdk-lib-*.tgz"))
	if len(tgzs) != 1 {
		t.Fatalf("aws-cdk-lib bundle: %v", tgzs)
	}
	f, err := os.Open(tgzs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("recommended-feature-flags.json not in %s: %v", tgzs[0], err)
		}
		if h.Name == "package/recommended-feature-flags.json" {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
}

// cdkJSONContext returns the context of the repository's cdk.json.
func cdkJSONContext(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Context
}

// TestFeatureFlags: cdk.json sets every feature flag `cdk init` sets for
// this aws-cdk-lib (so `cdk flags` reports none unconfigured), and the
// values it sets leave every stage's template exactly as it is without
// them: where a recommended value would change the deployed stack
// (replace a resource, rename one), cdk.json keeps the former behaviour,
// and docs/operations.md says which and why.
func TestFeatureFlags(t *testing.T) {
	requireNode(t)
	dirs := builtFunctions(t)
	ctx := cdkJSONContext(t)
	rec := recommendedFlags(t)
	var missing []string
	for k, v := range rec {
		if _, ok := ctx[k]; !ok {
			missing = append(missing, fmt.Sprintf("%s (cdk init sets %v)", k, v))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("cdk.json does not set the feature flag %s", m)
	}
	synthWith := func(context map[string]any) map[string]any {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &context})
		out := map[string]any{}
		var stacks []Stack
		for _, stage := range Stages {
			cfg, err := testConfig(stage)
			if err != nil {
				t.Fatal(err)
			}
			stacks = append(stacks, *NewStack(app, cfg.Name, &StackProps{Config: cfg, FunctionDirs: dirs}))
		}
		for i, stage := range Stages {
			out[stage] = *assertions.Template_FromStack(stacks[i].Stack, nil).ToJSON()
		}
		return out
	}
	plain := map[string]any{}
	for k, v := range ctx {
		if !strings.HasPrefix(k, "@aws-cdk") && !strings.HasPrefix(k, "@aws-cdk-containers") {
			plain[k] = v
		}
	}
	with, without := synthWith(ctx), synthWith(plain)
	for _, stage := range Stages {
		a, b := with[stage].(map[string]any), without[stage].(map[string]any)
		if reflect.DeepEqual(a, b) {
			continue
		}
		for _, section := range []string{"Resources", "Outputs", "Parameters", "Rules", "Conditions", "Mappings"} {
			sa, _ := a[section].(map[string]any)
			sb, _ := b[section].(map[string]any)
			for id := range union(sa, sb) {
				if !reflect.DeepEqual(sa[id], sb[id]) {
					ja, _ := json.Marshal(sa[id])
					jb, _ := json.Marshal(sb[id])
					t.Errorf("%s: cdk.json's feature flags change %s %s:\nwith:    %s\nwithout: %s", stage, section, id, clip(string(ja)), clip(string(jb)))
				}
			}
		}
	}
}

func union(a, b map[string]any) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func clip(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
