package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/client"
)

// generatorPython installs openapi-python-client (pinned in
// testdata/openapi-python/requirements.txt) into its cached virtualenv and
// returns the virtualenv's python. Unavailable, the test is skipped, and
// fails under CI=true.
func generatorPython(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", "testdata/openapi-python/venv.sh", "python")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.EqualFold(os.Getenv("CI"), "true") {
			t.Fatalf("openapi-python-client unavailable (CI=true, so this fails instead of skipping): %v: %s", err, stderr.String())
		}
		t.Skipf("openapi-python-client unavailable: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// TestGeneratedPythonClient checks that the OpenAPI document the server
// serves generates a working client with a standard generator: it runs
// openapi-python-client on GET /openapi.json (any warning fails: a part of
// the document the generator skipped would be missing from the client),
// then a Python script that registers a card, raises an expectation,
// reports the fact that satisfies it and reads the record back through the
// generated client; the Go client then reads the same record.
func TestGeneratedPythonClient(t *testing.T) {
	python := generatorPython(t)
	url := startServer(t)
	dir := t.TempDir()
	pkg := filepath.Join(dir, "clockwork_client")
	bin := filepath.Dir(python)

	gen := exec.Command(filepath.Join(bin, "openapi-python-client"), "generate", "--url", url+"/openapi.json", "--meta", "none", "--output-path", pkg)
	// The generator formats its output with ruff, from the same virtualenv.
	// Both commands fetch from loopback: never through a proxy the environment names.
	gen.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	gen.Dir = dir
	out, err := gen.CombinedOutput()
	if err != nil {
		t.Fatalf("openapi-python-client generate: %v\n%s", err, out)
	}
	if s := string(out); strings.Contains(s, "Warning") || strings.Contains(s, "Error") || strings.Contains(s, "not in PATH") {
		t.Fatalf("openapi-python-client did not take the whole document:\n%s", s)
	}
	for _, f := range []string{"client.py", "api/expectations_watcher/raise_expectations.py", "api/evaluation_loop/append_event.py", "api/expectations_watcher/a_2_a_push.py", "models/events_response.py"} {
		if _, err := os.Stat(filepath.Join(pkg, f)); err != nil {
			t.Errorf("the generated client lacks %s: %v", f, err)
		}
	}

	const agent = "python-agent"
	run := exec.Command(python, "testdata/openapi-python/roundtrip.py", url, testToken, agent)
	run.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1", "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("roundtrip.py: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var got struct {
		RaisedState, ProblemField, State, SatisfiedBy, DueAt, Grace string
		Satisfied                                                   []string
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("roundtrip.py printed %q: %v", stdout.String(), err)
	}
	if got.RaisedState != "open" || got.State != "satisfied" || got.SatisfiedBy != "invoice.py.paid" || got.Grace != "PT2H" ||
		len(got.Satisfied) != 1 || got.Satisfied[0] != "inv-py-paid" || got.ProblemField != "expectations[0].kind" {
		t.Fatalf("through the generated client: %+v", got)
	}

	c := newClient(t, url, client.Options{})
	rec, err := c.Expectation(context.Background(), agent, "inv-py-paid")
	if err != nil || rec.State != client.StateSatisfied || rec.DueAt != got.DueAt || rec.SatisfiedBy == nil || rec.SatisfiedBy.Source != "client-test" {
		t.Fatalf("the Go client reads: %v %+v", err, rec)
	}
}
