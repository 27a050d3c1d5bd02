package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The synth is expensive (the construct library loads into node in ~15 s),
// so each test binary synthesizes once: one app holding the stack of every
// stage, built from one build of the functions, shared by all the tests.

var (
	tmpRoot     string
	tmpRootOnce sync.Once

	buildOnce sync.Once
	buildDirs map[string]string
	buildErr  error

	synthOnce sync.Once
	synthErr  error
	synthed   map[string]*synthesized
	// judgeSynthed holds the stacks of judgeConfigs, by judge kind.
	judgeSynthed map[string]*synthesized
	jsiiUsed     bool
)

// judgeConfigs are the judge settings of the stacks synthesized beside the
// stages' (synthJudges).
var judgeConfigs = map[string]func(*Config){
	"bedrock": func(c *Config) {
		c.JudgeKind, c.JudgeModel = "bedrock", "anthropic.claude-3-haiku-20240307-v1:0"
		// And the VERIFY signing key (the IAM check needs a stack with it).
		c.SigningKeyParameter = "/clockwork/judge/verify-key"
	},
	"openai": func(c *Config) {
		c.JudgeKind, c.JudgeModel, c.JudgeURL, c.JudgeAPIKeyParameter = "openai", "gpt-4o-mini", "https://api.openai.com/v1", "/clockwork/judge/openai-key"
		// And browser origins allowed to call /mcp (TestMCPAllowedOrigins).
		c.MCPAllowedOrigins = "https://console.example.com"
	},
}

// synthJudges returns the synthesized stacks with a model judge, by kind.
func synthJudges(t *testing.T) map[string]*synthesized {
	t.Helper()
	synth(t)
	return judgeSynthed
}

type synthesized struct {
	cfg      Config
	stack    *Stack
	template assertions.Template
	json     map[string]any
}

func TestMain(m *testing.M) {
	code := m.Run()
	if jsiiUsed {
		jsii.Close()
	}
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

func inCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v != "" && v != "false" && v != "0"
}

// requireNode skips a test that needs Node.js when it is missing, except
// in CI (CI=true), where a missing node is a broken machine: it fails.
//
// A node older than MinNodeMajor (or none) is replaced by the pinned
// Node.js 22 that NodeInstaller installs once from the npm registry, which
// the jsii runtime (and the app run by TestAppSynthesizes) then uses
// through JSII_NODE.
func requireNode(t *testing.T) {
	t.Helper()
	skipShort(t)
	nodeOnce.Do(func() {
		if _, err := CheckNode(exec.LookPath); err == nil {
			return
		}
		out, err := exec.Command("bash", filepath.Join(repoRoot(t), NodeInstaller), "path").Output()
		if err != nil {
			nodeErr = fmt.Errorf("%s path: %v", NodeInstaller, err)
			return
		}
		os.Setenv("JSII_NODE", strings.TrimSpace(string(out)))
		_, nodeErr = CheckNode(exec.LookPath)
	})
	if nodeErr != nil {
		if inCI() {
			t.Fatalf("CI is set and synth cannot run: %v", nodeErr)
		}
		t.Skipf("skipping synth: %v (with CI=true this fails)", nodeErr)
	}
}

// skipShort skips a test that builds the functions or synthesizes under
// go test -short: the developer loop keeps the infra tests that need
// neither, and the full run (CI) keeps them all.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the functions and synthesizes the stack (the full run does)")
	}
}

var (
	nodeOnce sync.Once
	nodeErr  error
)

// testConfig is the configuration of stage the tests synthesize: the
// stage's defaults, with the alarm subscription every stage but dev needs.
func testConfig(stage string) (Config, error) {
	cfg, err := DefaultConfig(stage)
	if err == nil && stage != "dev" {
		cfg.AlarmEmail = "oncall@example.com"
	}
	if stage == "staging" {
		// Alerts by e-mail and EventBridge: the IAM check then sees their
		// grants (dev and prod are checked without them).
		cfg.SESFrom, cfg.AlertEventBuses, cfg.PublicURL = "clockwork@example.com", "default,ops", "https://clockwork.example.com"
	}
	return cfg, err
}

func testTmp(t *testing.T) string {
	t.Helper()
	tmpRootOnce.Do(func() {
		var err error
		tmpRoot, err = os.MkdirTemp("", "clockwork-infra-test-")
		if err != nil {
			panic(err)
		}
	})
	return tmpRoot
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// builtFunctions builds the three functions once (arm64), as synth does.
func builtFunctions(t *testing.T) map[string]string {
	t.Helper()
	skipShort(t)
	root := repoRoot(t)
	out := filepath.Join(testTmp(t), "build")
	buildOnce.Do(func() { buildDirs, buildErr = BuildFunctions(root, "arm64", out) })
	if buildErr != nil {
		t.Fatalf("building the functions: %v", buildErr)
	}
	return buildDirs
}

// synth returns the synthesized stack of each stage.
func synth(t *testing.T) map[string]*synthesized {
	t.Helper()
	requireNode(t)
	dirs := builtFunctions(t)
	synthOnce.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				synthErr = fmt.Errorf("synth panicked: %v", r)
			}
		}()
		jsiiUsed = true
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(testTmp(t), "cdk.out"))})
		// cdk-nag's AwsSolutions and Serverless packs check every stack
		// during synthesis and write their findings as JSON reports in the
		// output directory (TestCDKNag reads them).
		for _, pack := range []awscdk.IAspect{
			cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(true), ReportFormats: &[]cdknag.NagReportFormat{cdknag.NagReportFormat_JSON}}),
			cdknag.NewServerlessChecks(&cdknag.NagPackProps{Reports: jsii.Bool(true), ReportFormats: &[]cdknag.NagReportFormat{cdknag.NagReportFormat_JSON}}),
		} {
			awscdk.Aspects_Of(app).Add(pack, nil)
		}
		synthed = map[string]*synthesized{}
		// Every stack first: the first synthesis freezes the tree.
		for _, stage := range Stages {
			cfg, err := testConfig(stage)
			if err != nil {
				synthErr = err
				return
			}
			st := NewStack(app, cfg.Name, &StackProps{Config: cfg, FunctionDirs: dirs})
			synthed[stage] = &synthesized{cfg: cfg, stack: st}
		}
		// Stacks with a model judge configured (dev settings, own names).
		judgeSynthed = map[string]*synthesized{}
		for kind, set := range judgeConfigs {
			cfg, _ := DefaultConfig("dev")
			cfg.Name = "clockwork-judge-" + kind
			set(&cfg)
			if err := cfg.checkJudge(); err != nil {
				synthErr = err
				return
			}
			st := NewStack(app, cfg.Name, &StackProps{Config: cfg, FunctionDirs: dirs})
			judgeSynthed[kind] = &synthesized{cfg: cfg, stack: st}
		}
		for _, sy := range synthed {
			sy.template = assertions.Template_FromStack(sy.stack.Stack, nil)
			sy.json = *sy.template.ToJSON()
		}
		for _, sy := range judgeSynthed {
			sy.template = assertions.Template_FromStack(sy.stack.Stack, nil)
			sy.json = *sy.template.ToJSON()
		}
	})
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthed
}

// assert runs an assertions call, which panics on a mismatch, and reports
// the panic as a test error.
func assert(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

// Template walking over the JSON form.

func resources(tj map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tj["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func props(res map[string]any) map[string]any {
	p, _ := res["Properties"].(map[string]any)
	return p
}

// only returns the one resource of typ whose properties have key == value.
func only(t *testing.T, tj map[string]any, typ, key string, value any) (string, map[string]any) {
	t.Helper()
	var id string
	var found map[string]any
	for rid, r := range resources(tj, typ) {
		if fmt.Sprint(props(r)[key]) == fmt.Sprint(value) {
			if found != nil {
				t.Fatalf("more than one %s with %s=%v", typ, key, value)
			}
			id, found = rid, r
		}
	}
	if found == nil {
		t.Fatalf("no %s with %s=%v", typ, key, value)
	}
	return id, found
}

// list turns a string-or-list IAM field into a list.
func list(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	default:
		return []any{x}
	}
}

func getAtt(id, attr string) map[string]any {
	return map[string]any{"Fn::GetAtt": []any{id, attr}}
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

// statementsOfRole returns every statement of the IAM policies attached to
// role (inline AWS::IAM::Policy resources).
func statementsOfRole(tj map[string]any, roleID string) []map[string]any {
	var out []map[string]any
	for _, p := range resources(tj, "AWS::IAM::Policy") {
		attached := false
		for _, r := range list(props(p)["Roles"]) {
			if fmt.Sprint(r) == fmt.Sprint(ref(roleID)) {
				attached = true
			}
		}
		if !attached {
			continue
		}
		doc := props(p)["PolicyDocument"].(map[string]any)
		for _, s := range list(doc["Statement"]) {
			out = append(out, s.(map[string]any))
		}
	}
	return out
}

// roleOfFunction returns the logical id of the execution role of the
// function named name.
func roleOfFunction(t *testing.T, tj map[string]any, name string) string {
	t.Helper()
	_, fn := only(t, tj, "AWS::Lambda::Function", "FunctionName", name)
	role := props(fn)["Role"].(map[string]any)["Fn::GetAtt"].([]any)
	return role[0].(string)
}

// actionsOf returns the Allow actions of stmts granted on resource (any
// resource when resource is nil).
func actionsOf(stmts []map[string]any) map[string][]any {
	out := map[string][]any{}
	for _, s := range stmts {
		if s["Effect"] != "Allow" {
			continue
		}
		for _, a := range list(s["Action"]) {
			out[a.(string)] = append(out[a.(string)], list(s["Resource"])...)
		}
	}
	return out
}
