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

	app := awscdk.NewApp(nil)
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
