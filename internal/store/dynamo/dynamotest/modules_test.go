package dynamotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmulatorModules runs the emulator's own tests (localstack/emulator/tests,
// one file per module, each against the DynamoDB behaviour it imitates) with
// the emulator's virtualenv, against an emulator of their own: they set
// faults, which must not reach this binary's other tests.
func TestEmulatorModules(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulator's module tests take about 15 s; -short skips them")
	}
	ep, stop, err := start()
	if err != nil {
		if isCI() {
			t.Fatalf("DynamoDB emulator unavailable (CI=true, so this fails instead of skipping): %v", err)
		}
		t.Skipf("DynamoDB emulator unavailable: %v", err)
	}
	defer stop()
	script, err := findScript()
	if err != nil {
		t.Fatal(err)
	}
	venv, err := exec.Command("bash", script, "path").Output()
	if err != nil {
		t.Fatalf("the emulator's virtualenv: %v", err)
	}
	root := filepath.Dir(script) // localstack/
	cmd := exec.Command(filepath.Join(strings.TrimSpace(string(venv)), "bin", "python"), "-m", "unittest", "discover", "-v",
		"-s", filepath.Join(root, "emulator", "tests"), "-t", root)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CLOCKWORK_EMULATOR_ENDPOINT="+ep, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("the emulator's module tests failed: %v", err)
	}
	if !strings.Contains(string(out), "test_ttl") || !strings.Contains(string(out), "OK") {
		t.Fatal("the module tests did not run")
	}
}
