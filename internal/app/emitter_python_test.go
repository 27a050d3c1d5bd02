package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonEmitterSigns runs the Python emitter of docs/evaluation.md
// (examples/emitters/python/sign.py, RFC 8785 by the rfc8785 package) against
// the embedded server: its ANTICIPATE, whose weights are written 1.0 as a
// Python emitter writes them, is accepted (201). The same message digested
// over json.dumps, the mistake the page warns of, is refused with 400 naming
// d_dna_signature.
func TestPythonEmitterSigns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: installs rfc8785 into a cached virtualenv on first use")
	}
	const dir = "../../examples/emitters/python"
	python := strings.TrimSpace(installTool(t, "bash", dir+"/venv.sh", "python"))
	e := startEnv(t)
	seed, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(seed), `"weight": 1.0`) {
		t.Fatal("the seed no longer writes a weight as 1.0: the test would not show the json.dumps mistake")
	}
	run := func(name string, naive bool) (string, string) {
		msg := strings.ReplaceAll(string(seed), "ant-20260624-001", "ant-py-"+name)
		msg = strings.ReplaceAll(msg, "plan-abc123", "plan-py-"+name)
		path := filepath.Join(t.TempDir(), name+".json")
		if err := os.WriteFile(path, []byte(msg), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{dir + "/sign.py", path}
		if naive {
			args = []string{dir + "/sign.py", "--naive", path}
		}
		cmd := exec.Command(python, args...)
		cmd.Env = append(os.Environ(), "CLOCKWORK_URL="+e.srv.URL, "CLOCKWORK_TOKEN="+adminToken)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sign.py %v: %v\n%s", args, err, out)
		}
		status, answer, _ := strings.Cut(string(out), "\n")
		return status, answer
	}
	if status, answer := run("jcs", false); status != "201" {
		t.Fatalf("signed with rfc8785: %s %s", status, answer)
	}
	if status, answer := run("naive", true); status != "400" || !strings.Contains(answer, "d_dna_signature") {
		t.Fatalf("signed over json.dumps: %s %s, want 400 naming d_dna_signature", status, answer)
	}
}
