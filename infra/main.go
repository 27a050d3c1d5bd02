// Command infra is the CDK v2 app (Go) that deploys clockwork: one stack per
// stage (-c stage=dev|staging|prod, default dev) holding the DynamoDB table,
// the api, clock and stream functions (built from this repository during
// synth), the HTTP API, the Scheduler group and role, the stream mapping, the
// dead-letter queues and the alarms. cdk.json at the repository root runs it
// ("go run ./infra"); see docs/operations.md.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clockwork infra: "+err.Error())
		os.Exit(1)
	}
}

// run synthesizes the app into the CDK output directory (CDK_OUTDIR, set by
// the CDK CLI; a temporary directory otherwise).
func run() (err error) {
	// Node.js first: without it the jsii runtime fails with a stack trace.
	if _, err := CheckNode(exec.LookPath); err != nil {
		return err
	}
	root, err := RepoRoot(".")
	if err != nil {
		return err
	}
	defer func() {
		// The construct library reports errors as panics; say which step.
		if r := recover(); r != nil {
			err = fmt.Errorf("synth failed: %v", r)
		}
	}()
	defer jsii.Close()

	// `go run ./infra -c stage=prod` works like the CLI's -c; anything else
	// on the command line is refused rather than ignored.
	argsContext, err := ContextFromArgs(os.Args[1:])
	if err != nil {
		return err
	}
	app := awscdk.NewApp(&awscdk.AppProps{PostCliContext: &argsContext})
	cfg, err := ConfigFromContext(func(key string) (any, bool) {
		v := app.Node().TryGetContext(jsii.String(key))
		return v, v != nil
	})
	if err != nil {
		return err
	}
	outdir := *app.Outdir()
	dirs, err := BuildFunctions(root, cfg.Arch, filepath.Join(outdir, ".build"))
	if err != nil {
		return err
	}
	NewStack(app, cfg.Name, &StackProps{Config: cfg, FunctionDirs: dirs})
	asm := app.Synth(nil)
	if err := checkCLI(*asm.Version()); err != nil {
		return err
	}
	if os.Getenv("CDK_OUTDIR") == "" {
		fmt.Fprintf(os.Stderr, "clockwork infra: synthesized stack %s (stage %s) to %s.\n"+
			"This was not run by the CDK CLI, so nothing was deployed: run `npx aws-cdk deploy -c stage=%s` from the repository root "+
			"(or `npm ci --prefix infra/_tools` once, then `infra/_tools/node_modules/.bin/cdk deploy -c stage=%s`).\n",
			cfg.Name, cfg.Stage, outdir, cfg.Stage, cfg.Stage)
	}
	return nil
}

// ContextFromArgs reads context from the app's own command line, the way
// the CDK CLI takes it: -c key=value, --context key=value, -c=key=value or
// --context=key=value, any number of times (the last wins). Keys must be
// ContextKeys; every other argument is an error that says what is
// accepted. These values win over cdk.json and the CLI's.
func ContextFromArgs(args []string) (map[string]any, error) {
	out := map[string]any{}
	usage := "pass context as -c key=value (keys: " + strings.Join(ContextKeys, ", ") + "), e.g. `go run ./infra -c stage=prod -c alarmEmail=oncall@example.com`, or deploy with `npx aws-cdk deploy -c stage=prod`"
	for i := 0; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case a == "-c" || a == "--context":
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs key=value: %s", a, usage)
			}
			i++
			kv = args[i]
		case strings.HasPrefix(a, "-c="):
			kv = strings.TrimPrefix(a, "-c=")
		case strings.HasPrefix(a, "--context="):
			kv = strings.TrimPrefix(a, "--context=")
		default:
			return nil, fmt.Errorf("unknown argument %q: %s", a, usage)
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("context %q is not key=value: %s", kv, usage)
		}
		known := false
		for _, c := range ContextKeys {
			known = known || c == k
		}
		if !known {
			return nil, fmt.Errorf("unknown context key %q: %s", k, usage)
		}
		out[k] = v
	}
	return out, nil
}

// checkCLI fails when the CDK CLI that runs the app (it announces its cloud
// assembly version in CDK_CLI_ASM_VERSION) is older than the assembly the
// construct library writes: such a CLI cannot read it.
func checkCLI(appAsm string) error {
	cli := os.Getenv("CDK_CLI_ASM_VERSION")
	if cli == "" {
		return nil
	}
	major := func(v string) int {
		m, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
		return m
	}
	if major(cli) < major(appAsm) {
		return fmt.Errorf("the CDK CLI (%s, cloud assembly %s) is too old for this app (cloud assembly %s): "+
			"use the pinned CLI (`npm ci --prefix infra/_tools`, then infra/_tools/node_modules/.bin/cdk) or `npx aws-cdk@latest`",
			os.Getenv("CDK_CLI_VERSION"), cli, appAsm)
	}
	return nil
}
