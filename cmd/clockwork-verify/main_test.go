package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/evidence"
	"github.com/agentclock/clockwork/internal/evidence/evidencetest"
)

func runCmd(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, bytes.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVerifyCommand(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	good, err := evidencetest.Build(7, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "bundle.json")
	if err := os.WriteFile(file, good, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCmd(t, nil, file)
	if code != 0 || !strings.Contains(out, "VERIFIED: ") || !strings.Contains(out, "ok     verification.server_signature") {
		t.Fatalf("good bundle: exit %d\n%s", code, out)
	}
	code, out, _ = runCmd(t, good, "-q", "-key", base64.RawURLEncoding.EncodeToString(pub), "-")
	if code != 0 || strings.Count(out, "\n") != 1 {
		t.Fatalf("good bundle on stdin with the key pinned, quiet: exit %d\n%s", code, out)
	}
	d := evidencetest.Decode(t, good)
	d.Verification()["verdict"] = "FAIL"
	code, out, _ = runCmd(t, d.Bytes(), "-")
	if code != 1 || !strings.Contains(out, "FAILED: the first broken link is verification.d_dna_signature") {
		t.Fatalf("tampered: exit %d\n%s", code, out)
	}
	other, _, _ := ed25519.GenerateKey(nil)
	if code, out, _ := runCmd(t, nil, "-key", base64.RawURLEncoding.EncodeToString(other), file); code != 1 || !strings.Contains(out, "public_key.public_key") {
		t.Fatalf("another pinned key: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{}, {"-key", "nope", file}, {filepath.Join(dir, "missing.json")}, {"a", "b"}, {"-bogus", file}} {
		if code, _, _ := runCmd(t, nil, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestVerifyCommandSuite runs the tampering suite through the command:
// exit 0 on the good bundle and its equivalents, 1 naming the first broken
// link otherwise.
func TestVerifyCommandSuite(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	good, err := evidencetest.Build(5, key)
	if err != nil {
		t.Fatal(err)
	}
	viaCommand := func(b []byte, opt evidence.Options) *evidence.Report {
		args := []string{"-"}
		if opt.TrustedKey != nil {
			args = []string{"-key", base64.RawURLEncoding.EncodeToString(opt.TrustedKey), "-"}
		}
		code, out, _ := runCmd(t, b, args...)
		rep := &evidence.Report{}
		switch {
		case code == 0 && strings.Contains(out, "VERIFIED: "):
			rep.Findings = append(rep.Findings, evidence.Finding{Link: "all", OK: true})
		case code == 1:
			_, first, _ := strings.Cut(out, "FAILED: the first broken link is ")
			link, detail, _ := strings.Cut(strings.TrimSpace(first), ": ")
			rep.Findings = append(rep.Findings, evidence.Finding{Link: link, Detail: detail})
		default:
			t.Fatalf("exit %d: %s", code, out)
		}
		return rep
	}
	evidencetest.Suite(t, good, viaCommand, 100)
}
