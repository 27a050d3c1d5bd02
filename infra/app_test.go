package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runApp runs the app as the CDK CLI does (cdk.json's "app" command from
// the repository root, with the output directory and the context in the
// environment) and returns its exit code and stderr.
func runApp(t *testing.T, root, outdir string, context map[string]any, env ...string) (int, string) {
	t.Helper()
	return runAppArgs(t, root, outdir, context, nil, env...)
}

// runAppArgs is runApp with appArgs on the app's command line
// (go run ./infra appArgs...).
func runAppArgs(t *testing.T, root, outdir string, context map[string]any, appArgs []string, env ...string) (int, string) {
	t.Helper()
	var cfg struct {
		App string `json:"app"`
	}
	b, err := os.ReadFile(filepath.Join(root, "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("cdk.json: %v", err)
	}
	args := strings.Fields(cfg.App)
	if len(args) != 3 || args[0] != "go" || args[1] != "run" || args[2] != "./infra" {
		t.Fatalf("cdk.json app is %q, want \"go run ./infra\"", cfg.App)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	ctxJSON, _ := json.Marshal(context)
	cmd := exec.Command(goBin, append(args[1:], appArgs...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CDK_OUTDIR="+outdir, "CDK_CONTEXT_JSON="+string(ctxJSON))
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err = cmd.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stderr.String()
		}
		t.Fatalf("running the app: %v", err)
	}
	return 0, stderr.String()
}

// TestAppSynthesizes is what CI checks on a fresh machine: the app that
// cdk.json names synthesizes from a clean checkout with nothing but Go and
// Node.js (no CDK CLI, no AWS credentials), building the functions itself;
// and bad input fails with a message saying what to do.
func TestAppSynthesizes(t *testing.T) {
	requireNode(t)
	root := repoRoot(t)

	t.Run("prod", func(t *testing.T) {
		out := t.TempDir()
		code, stderr := runApp(t, root, out, map[string]any{"stage": "prod", "alarmEmail": "oncall@example.com"})
		if code != 0 {
			t.Fatalf("synth exited %d:\n%s", code, stderr)
		}
		var manifest struct {
			Artifacts map[string]struct {
				Type       string `json:"type"`
				Properties struct {
					TemplateFile string `json:"templateFile"`
				} `json:"properties"`
			} `json:"artifacts"`
		}
		readJSON(t, filepath.Join(out, "manifest.json"), &manifest)
		art, ok := manifest.Artifacts["clockwork-prod"]
		if !ok || art.Type != "aws:cloudformation:stack" {
			t.Fatalf("no stack clockwork-prod in the cloud assembly: %+v", manifest.Artifacts)
		}
		var tmpl map[string]any
		readJSON(t, filepath.Join(out, art.Properties.TemplateFile), &tmpl)
		table := tmpl["Resources"].(map[string]any)["Table"].(map[string]any)
		if table["DeletionPolicy"] != "Retain" || props(table)["DeletionProtectionEnabled"] != true {
			t.Errorf("prod table is not retained and protected: %v %v", table["DeletionPolicy"], props(table)["DeletionProtectionEnabled"])
		}
		// Three zip assets, each a directory with an arm64 bootstrap.
		var assets struct {
			Files map[string]struct {
				Source struct {
					Path      string `json:"path"`
					Packaging string `json:"packaging"`
				} `json:"source"`
			} `json:"files"`
		}
		readJSON(t, filepath.Join(out, "clockwork-prod.assets.json"), &assets)
		zips := 0
		for _, f := range assets.Files {
			if f.Source.Packaging != "zip" {
				continue
			}
			zips++
			bin, err := elf.Open(filepath.Join(out, f.Source.Path, "bootstrap"))
			if err != nil {
				t.Errorf("asset %s: %v", f.Source.Path, err)
				continue
			}
			if bin.Machine != elf.EM_AARCH64 {
				t.Errorf("asset %s: bootstrap is %v, want arm64", f.Source.Path, bin.Machine)
			}
			bin.Close()
		}
		if zips != len(Functions) {
			t.Errorf("%d function assets, want %d", zips, len(Functions))
		}
	})

	t.Run("wrong stage", func(t *testing.T) {
		code, stderr := runApp(t, root, t.TempDir(), map[string]any{"stage": "qa"})
		if code == 0 || !strings.Contains(stderr, `unknown stage "qa"`) || !strings.Contains(stderr, "-c stage=prod") {
			t.Errorf("stage qa: exit %d, stderr:\n%s", code, stderr)
		}
	})

	t.Run("prod without an alarm subscription", func(t *testing.T) {
		code, stderr := runApp(t, root, t.TempDir(), map[string]any{"stage": "prod"})
		if code == 0 || !strings.Contains(stderr, "-c alarmEmail=") {
			t.Errorf("prod without alarmEmail: exit %d, stderr:\n%s", code, stderr)
		}
	})

	// `go run ./infra -c stage=prod` reads its arguments (it used to
	// ignore them and synthesize dev): prod without an alarm subscription
	// is refused, which dev would not be; an argument it does not know is
	// refused too. (Both fail before the functions are built: cheap.)
	t.Run("arguments", func(t *testing.T) {
		code, stderr := runAppArgs(t, root, t.TempDir(), nil, []string{"-c", "stage=prod"})
		if code == 0 || !strings.Contains(stderr, "stage prod needs someone to hear its alarms") {
			t.Errorf("go run ./infra -c stage=prod: exit %d, stderr:\n%s", code, stderr)
		}
		for _, bad := range [][]string{{"--stage", "prod"}, {"-c", "stage"}, {"-c", "colour=blue"}, {"deploy"}} {
			code, stderr := runAppArgs(t, root, t.TempDir(), nil, bad)
			if code == 0 || !strings.Contains(stderr, "-c key=value") {
				t.Errorf("go run ./infra %v: exit %d, stderr:\n%s", bad, code, stderr)
			}
		}
	})

	t.Run("old node", func(t *testing.T) {
		bin := t.TempDir()
		goBin, _ := exec.LookPath("go")
		if err := os.Symlink(goBin, filepath.Join(bin, "go")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, "node"), []byte("#!/bin/sh\necho v20.20.2\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		cgo, _ := exec.Command(goBin, "env", "CGO_ENABLED").Output()
		code, stderr := runApp(t, root, t.TempDir(), nil, "PATH="+bin+":/bin:/usr/bin", "CGO_ENABLED="+strings.TrimSpace(string(cgo)), "JSII_NODE=")
		if code == 0 || !strings.Contains(stderr, "too old") || !strings.Contains(stderr, NodeInstaller) {
			t.Errorf("with node 20: exit %d, stderr:\n%s", code, stderr)
		}
	})

	t.Run("no node", func(t *testing.T) {
		// Only go on PATH: the app must say to install Node.js, not crash.
		bin := t.TempDir()
		goBin, _ := exec.LookPath("go")
		if err := os.Symlink(goBin, filepath.Join(bin, "go")); err != nil {
			t.Fatal(err)
		}
		// Keep cgo as it is (no C compiler on PATH would turn it off and
		// rebuild everything).
		cgo, err := exec.Command(goBin, "env", "CGO_ENABLED").Output()
		if err != nil {
			t.Fatal(err)
		}
		code, stderr := runApp(t, root, t.TempDir(), nil, "PATH="+bin, "CGO_ENABLED="+strings.TrimSpace(string(cgo)), "JSII_NODE=")
		if code == 0 || !strings.Contains(stderr, "Install Node.js") {
			t.Errorf("without node: exit %d, stderr:\n%s", code, stderr)
		}
	})
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
