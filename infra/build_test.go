package main

import (
	"archive/zip"
	"debug/elf"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// These tests need no Node.js.

// TestConcurrencyArithmetic pins the reservations docs/operations.md
// explains: the stream function of prod covers the stream shards planned
// for its load (StreamParallelization invocations per shard), and the clock's SQS mapping
// scales below the clock's reservation in every stage.
func TestConcurrencyArithmetic(t *testing.T) {
	for _, stage := range Stages {
		c, err := DefaultConfig(stage)
		if err != nil {
			t.Fatal(err)
		}
		if stage == "prod" && c.StreamConcurrency < PlannedStreamShards*StreamParallelization {
			t.Errorf("prod reserves %d stream invocations for %d planned shards of %d batches at once", c.StreamConcurrency, PlannedStreamShards, StreamParallelization)
		}
		if mc := TimerQueueMaxConcurrency(c.ClockConcurrency); mc < 2 || mc >= c.ClockConcurrency {
			t.Errorf("%s: timer queue maximum concurrency %d with the clock reserving %d", stage, mc, c.ClockConcurrency)
		}
	}
	for reserved, want := range map[int]int{0: 0, 1: 2, 3: 2, 5: 3, 20: 12, 100: 60} {
		if got := TimerQueueMaxConcurrency(reserved); got != want {
			t.Errorf("TimerQueueMaxConcurrency(%d) = %d, want %d", reserved, got, want)
		}
	}
}

func TestStages(t *testing.T) {
	for _, stage := range Stages {
		c, err := DefaultConfig(stage)
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		if c.Name != "clockwork-"+stage || c.Arch != "arm64" || c.TokensParameter != "/clockwork/"+stage+"/tokens" {
			t.Errorf("%s: %+v", stage, c)
		}
		if c.Retain() != (stage != "dev") {
			t.Errorf("%s: Retain() = %v", stage, c.Retain())
		}
	}
	for _, bad := range []string{"qa", "Prod", "production", " "} {
		_, err := ConfigFromContext(ctx(map[string]any{"stage": bad}))
		if bad == " " {
			// Blank is the default, dev.
			if err != nil {
				t.Errorf("blank stage: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "unknown stage") || !strings.Contains(err.Error(), "-c stage=prod") {
			t.Errorf("stage %q: error %v does not say what to pass", bad, err)
		}
	}
	c, err := ConfigFromContext(ctx(nil))
	if err != nil || c.Stage != "dev" {
		t.Errorf("no stage: %v, %v; want dev", c.Stage, err)
	}
	c, err = ConfigFromContext(ctx(map[string]any{
		"stage": "prod", "arch": "x86_64", "clockConcurrency": "0", "throttleRate": float64(7), "throttleBurst": "9",
		"tokensParameter": "/x/y", "alarmEmail": "ops@example.com",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "x86_64" || c.ClockConcurrency != 0 || c.ThrottleRate != 7 || c.ThrottleBurst != 9 || c.TokensParameter != "/x/y" || c.AlarmEmail != "ops@example.com" {
		t.Errorf("overrides not applied: %+v", c)
	}
	if c, err := ConfigFromContext(ctx(map[string]any{"allowPrivateAgents": "true"})); err != nil || !c.AllowPrivateAgents {
		t.Errorf("dev allowPrivateAgents=true: %v %v", c.AllowPrivateAgents, err)
	}
	if _, err := ConfigFromContext(ctx(map[string]any{"stage": "prod", "allowPrivateAgents": true})); err == nil || !strings.Contains(err.Error(), "only a dev stage") {
		t.Errorf("prod allowPrivateAgents=true: %v", err)
	}
	for k, v := range map[string]any{
		"arch": "arm", "clockConcurrency": "-1", "throttleRate": "0", "throttleBurst": "many",
		"tokensParameter": "tokens", "alarmEmail": "nobody", "stage": []any{"dev"}, "allowPrivateAgents": "yes please",
	} {
		if _, err := ConfigFromContext(ctx(map[string]any{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("context %s=%v: error %v does not name the key", k, v, err)
		}
	}
}

func ctx(m map[string]any) func(string) (any, bool) {
	return func(k string) (any, bool) { v, ok := m[k]; return v, ok }
}

func TestCheckNodeMissing(t *testing.T) {
	t.Setenv("JSII_NODE", "")
	_, err := CheckNode(func(string) (string, error) { return "", errors.New("not found") })
	if err == nil || !strings.Contains(err.Error(), "Install Node.js") || !strings.Contains(err.Error(), "run synth again") {
		t.Fatalf("missing node: %v", err)
	}
	// An old node is refused with the version it needs.
	dir := t.TempDir()
	fake := filepath.Join(dir, "node")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho v20.20.2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = CheckNode(func(string) (string, error) { return fake, nil })
	if err == nil || !strings.Contains(err.Error(), "too old") || !strings.Contains(err.Error(), strconv.Itoa(MinNodeMajor)) {
		t.Fatalf("old node: %v", err)
	}
}

func TestCheckCLI(t *testing.T) {
	t.Setenv("CDK_CLI_ASM_VERSION", "")
	if err := checkCLI("55.0.0"); err != nil {
		t.Errorf("no CLI: %v", err)
	}
	t.Setenv("CDK_CLI_ASM_VERSION", "54.1.0")
	t.Setenv("CDK_CLI_VERSION", "2.1000.0")
	if err := checkCLI("55.0.0"); err == nil || !strings.Contains(err.Error(), "too old") || !strings.Contains(err.Error(), "npm ci --prefix infra/_tools") {
		t.Errorf("old CLI: %v", err)
	}
	t.Setenv("CDK_CLI_ASM_VERSION", "55.0.0")
	if err := checkCLI("55.0.0"); err != nil {
		t.Errorf("same CLI: %v", err)
	}
}

// fakeRepo makes a module named like this one with the given functions.
func fakeRepo(t *testing.T, mains map[string]string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module "+ModulePath+"\n\ngo 1.22\n")
	for name, src := range mains {
		write("functions/"+name+"/main.go", src)
	}
	return root
}

func TestBuildFailureNamesFunction(t *testing.T) {
	root := fakeRepo(t, map[string]string{
		"api":        "package main\n\nfunc main() {}\n",
		"authorizer": "package main\n\nfunc main() {}\n",
		"clock":      "package main\n\nfunc main() { undefinedCall() }\n",
	})
	sub := filepath.Join(root, "functions", "api")
	if r, err := RepoRoot(sub); err != nil || r != root {
		t.Fatalf("RepoRoot(%s) = %s, %v", sub, r, err)
	}
	_, err := BuildFunctions(root, "arm64", t.TempDir())
	if err == nil {
		t.Fatal("a function that does not compile built")
	}
	msg := err.Error()
	for _, want := range []string{"function clock did not build", "undefinedCall", "./functions/clock", "Fix ./functions/clock", "GOARCH=arm64"} {
		if !strings.Contains(msg, want) {
			t.Errorf("build error lacks %q:\n%s", want, msg)
		}
	}
	// A missing main says where it belongs.
	err = BuildFunction(root, "stream", "arm64", t.TempDir())
	if !errors.Is(err, ErrNoFunction) || !strings.Contains(err.Error(), "functions/<name>") {
		t.Errorf("missing function: %v", err)
	}
	if _, err := RepoRoot(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cdk.json") {
		t.Errorf("outside the repository: %v", err)
	}
}

// The functions build for Lambda: static linux executables for the
// architecture, named bootstrap.
func TestFunctionBinaries(t *testing.T) {
	for name, dir := range builtFunctions(t) {
		f, err := elf.Open(filepath.Join(dir, "bootstrap"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
			t.Errorf("%s: %v %v %v, want a 64-bit arm64 executable", name, f.Class, f.Machine, f.Type)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked (cgo?): provided.al2023 needs a static binary", name)
			}
		}
		if f.Section(".symtab") != nil {
			t.Errorf("%s is not stripped (-ldflags '-s -w')", name)
		}
		f.Close()
		// provided.al2023 has no zoneinfo: the functions ship Go's, which
		// $ZONEINFO names, and it loads the zones cron heartbeats use.
		zr, err := zip.OpenReader(filepath.Join(dir, ZoneinfoFile))
		if err != nil {
			t.Errorf("%s ships no time zone database: %v", name, err)
			continue
		}
		for _, zone := range []string{"Europe/Riga", "America/New_York"} {
			if !slices.ContainsFunc(zr.File, func(f *zip.File) bool { return f.Name == zone }) {
				t.Errorf("%s's %s lacks %s", name, ZoneinfoFile, zone)
			}
		}
		zr.Close()
	}
}

// Every pattern internal/httpapi serves is a route of the HTTP API, and
// nothing else is: a request API Gateway refuses never reaches the
// function, so the two lists must agree.
func TestRoutesMatchHTTPHandler(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "internal", "httpapi")
	pattern := regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE) (/\S*)$`)
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var served, servedPublic []string
	{
		for _, f := range files {
			// Public routes: the route literals {Pattern: "...", Public: true}.
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				var pattern string
				public := false
				for _, e := range lit.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key, _ := kv.Key.(*ast.Ident)
					switch {
					case key == nil:
					case key.Name == "Pattern":
						if b, ok := kv.Value.(*ast.BasicLit); ok {
							pattern, _ = strconv.Unquote(b.Value)
						}
					case key.Name == "Public":
						if id, ok := kv.Value.(*ast.Ident); ok && id.Name == "true" {
							public = true
						}
					}
				}
				if public && pattern != "" {
					servedPublic = append(servedPublic, pattern)
				}
				return true
			})
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				v, err := strconv.Unquote(lit.Value)
				if err == nil && pattern.MatchString(v) {
					served = append(served, v)
				}
				return true
			})
		}
	}
	if len(served) == 0 {
		t.Fatalf("found no route patterns in %s", dir)
	}
	var routes, public []string
	for _, r := range Routes {
		routes = append(routes, r.Method+" "+r.Path)
		if r.Public {
			public = append(public, r.Method+" "+r.Path)
		}
	}
	// The routes deployed without the authorizer are exactly the ones the
	// handler serves without a token.
	sort.Strings(servedPublic)
	sort.Strings(public)
	if len(servedPublic) == 0 || !slices.Equal(servedPublic, public) {
		t.Errorf("public routes: internal/httpapi serves %v without a token, the HTTP API skips the authorizer on %v", servedPublic, public)
	}
	sort.Strings(served)
	sort.Strings(routes)
	served = slices.Compact(served)
	for _, s := range served {
		if !slices.Contains(routes, s) {
			t.Errorf("internal/httpapi serves %q but the HTTP API has no such route: add it to Routes in infra/stack.go", s)
		}
	}
	for _, r := range routes {
		if !slices.Contains(served, r) {
			t.Errorf("the HTTP API routes %q but internal/httpapi does not serve it: remove it from Routes in infra/stack.go", r)
		}
	}
}

// TestContextFromArgs: the app's own command line takes -c key=value like
// the CLI and refuses anything else, saying what it takes.
func TestContextFromArgs(t *testing.T) {
	got, err := ContextFromArgs([]string{"-c", "stage=prod", "--context", "alarmEmail=a@b.c", "-c=arch=x86_64", "--context=stage=staging"})
	if err != nil {
		t.Fatal(err)
	}
	if got["stage"] != "staging" || got["alarmEmail"] != "a@b.c" || got["arch"] != "x86_64" || len(got) != 3 {
		t.Errorf("context %v", got)
	}
	for _, bad := range [][]string{{"--stage", "prod"}, {"-c"}, {"-c", "stage"}, {"-c", "=prod"}, {"-c", "colour=blue"}, {"synth"}} {
		if _, err := ContextFromArgs(bad); err == nil || !strings.Contains(err.Error(), "-c key=value") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestAlarmSubscriptionRequiredOutsideDev: staging and prod refuse to
// synthesize without someone to hear the alarms, saying what to pass.
func TestAlarmSubscriptionRequiredOutsideDev(t *testing.T) {
	for _, stage := range Stages {
		_, err := ConfigFromContext(ctx(map[string]any{"stage": stage}))
		if stage == "dev" {
			if err != nil {
				t.Errorf("dev without alarmEmail: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "-c alarmEmail=") {
			t.Errorf("%s without alarmEmail: %v", stage, err)
		}
		if _, err := ConfigFromContext(ctx(map[string]any{"stage": stage, "alarmEmail": "oncall@example.com"})); err != nil {
			t.Errorf("%s with alarmEmail: %v", stage, err)
		}
	}
}
