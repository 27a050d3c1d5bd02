package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// ModulePath is the module whose functions the stack deploys.
const ModulePath = "github.com/agentclock/clockwork"

// Functions are the Lambda mains, each at functions/<name> (package main,
// calling lambda.Start).
var Functions = []string{"api", "authorizer", "clock", "grader", "ingest", "stream"}

// MinNodeMajor is the oldest Node.js the CDK construct library supports
// (22 and 24; 20 reached its end of life in April 2026).
const MinNodeMajor = 22

// NodeInstaller installs (once, pinned, cached) and prints a Node.js 22 for
// machines whose own is older.
const NodeInstaller = "infra/_tools/node22.sh"

// CheckNode verifies that the Node.js the CDK construct library runs on is
// present and recent enough. The Go CDK is a binding to the JavaScript
// library (jsii): without node, synth cannot start. lookPath is
// exec.LookPath outside tests. JSII_NODE, when set, names the node binary,
// as the jsii runtime honours it.
func CheckNode(lookPath func(string) (string, error)) (string, error) {
	bin := os.Getenv("JSII_NODE")
	if bin == "" {
		bin = "node"
	}
	path, err := lookPath(bin)
	if err != nil {
		return "", fmt.Errorf("no Node.js (%s) found on PATH: the CDK construct library runs on Node.js even for a Go app. "+
			"Install Node.js %d or newer (https://nodejs.org), or run with JSII_NODE=\"$(%s path)\" (installs the pinned Node.js 22 from the npm registry once), "+
			"check that `node --version` works in this shell, and run synth again", bin, MinNodeMajor, NodeInstaller)
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version failed (%v): reinstall Node.js %d or newer and run synth again", path, err, MinNodeMajor)
	}
	v := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if major < MinNodeMajor {
		return "", fmt.Errorf("the Node.js %s at %s is too old: the CDK construct library needs Node.js %d or newer; upgrade it, "+
			"or run with JSII_NODE=\"$(%s path)\" (installs the pinned Node.js 22 from the npm registry once), and run synth again", v, path, MinNodeMajor, NodeInstaller)
	}
	return v, nil
}

// RepoRoot finds the repository root (the directory of the go.mod of
// ModulePath) from dir upwards.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modulePath(b) == ModulePath {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of module %s in %s or above: run synth from the repository (the directory of cdk.json), e.g. `npx aws-cdk synth` there", ModulePath, dir)
		}
		d = parent
	}
}

var moduleLine = regexp.MustCompile(`^module\s+"?([^\s"]+)"?`)

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if m := moduleLine.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			return m[1]
		}
	}
	return ""
}

// GoArch maps a Lambda architecture to GOARCH.
func GoArch(lambdaArch string) string {
	if lambdaArch == "x86_64" {
		return "amd64"
	}
	return "arm64"
}

// ErrNoFunction is returned (wrapped) by BuildFunction when functions/<name>
// does not exist.
var ErrNoFunction = errors.New("function main not found")

// BuildFunction cross-compiles functions/<name> of the repository at root
// for Lambda (linux, the GOARCH of arch, no cgo, stripped, reproducible) to
// outDir/bootstrap, the executable the provided.al2023 runtime starts. The
// error of a failed build names the function, quotes the compiler and says
// how to reproduce it.
func BuildFunction(root, name, arch, outDir string) error {
	pkg := "./functions/" + name
	if st, err := os.Stat(filepath.Join(root, "functions", name)); err != nil || !st.IsDir() {
		return fmt.Errorf("function %s: %w: %s does not exist; each Lambda main lives at functions/<name> (package main calling lambda.Start): restore it, or remove %q from Functions in infra/build.go together with its resources",
			name, ErrNoFunction, filepath.Join(root, "functions", name), name)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("function %s: %w", name, err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("function %s: the go command was not found on PATH: install Go (see go.mod for the version) and run synth again", name)
	}
	goarch := GoArch(arch)
	// lambda.norpc leaves out aws-lambda-go's net/rpc server, which only
	// the retired go1.x runtime used (about 400 KB of each bootstrap, with
	// encoding/gob and html/template); provided.al2023 speaks the Runtime
	// API. functions/lambdatest builds the bootstraps the same way.
	args := []string{"build", "-tags=lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", filepath.Join(outDir, "bootstrap"), pkg}
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("function %s did not build (%v):\n  GOOS=linux GOARCH=%s CGO_ENABLED=0 go %s\n%s\nFix %s so that it builds (reproduce with `GOOS=linux GOARCH=%s CGO_ENABLED=0 go build %s` at the repository root) and run synth again",
			name, err, goarch, strings.Join(args, " "), indent(out.String()), pkg, goarch, pkg)
	}
	return copyZoneinfo(goBin, outDir)
}

// ZoneinfoFile is the time zone database shipped beside each bootstrap:
// provided.al2023 has no /usr/share/zoneinfo, and cron heartbeats and
// silences name IANA zones. The functions find it through $ZONEINFO
// (ZoneinfoEnv), which Go's time.LoadLocation reads first; shipping the
// Go distribution's zip keeps it out of the bootstrap's size budget.
const ZoneinfoFile = "zoneinfo.zip"

// ZoneinfoEnv is the value of the functions' ZONEINFO variable.
const ZoneinfoEnv = "/var/task/" + ZoneinfoFile

// copyZoneinfo copies the Go distribution's lib/time/zoneinfo.zip to
// outDir.
func copyZoneinfo(goBin, outDir string) error {
	out, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "lib", "time", ZoneinfoFile)
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("the time zone database to ship with the functions: %w (the Go distribution's lib/time/zoneinfo.zip)", err)
	}
	return os.WriteFile(filepath.Join(outDir, ZoneinfoFile), data, 0o644)
}

// BuildFunctions builds every function into outRoot/<name>/bootstrap and
// returns the directory of each. The first failure stops the build.
func BuildFunctions(root, arch, outRoot string) (map[string]string, error) {
	dirs := map[string]string{}
	for _, name := range Functions {
		dir := filepath.Join(outRoot, name)
		if err := BuildFunction(root, name, arch, dir); err != nil {
			return nil, err
		}
		dirs[name] = dir
	}
	return dirs, nil
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "  (no compiler output)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
