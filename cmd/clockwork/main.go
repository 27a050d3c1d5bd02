// Command clockwork is the command line for a clockwork server. Its one
// subcommand so far is eval, for CI:
//
//	clockwork eval --server URL --filter agentId=agent-1 --criteria criteria.json --fail-under 0.9
//
// which re-grades the agent's stored executions against the criteria in
// criteria.json (POST /v1/evaluations), prints a table and exits 1 when
// the pass rate is under the bar (2 on bad flags or a server error). The
// token comes from --token or CLOCKWORK_TOKEN, the server from --server or
// CLOCKWORK_URL. (Evidence bundles are checked by clockwork-verify.)
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/agentclock/clockwork/internal/evalcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: clockwork <command> [flags]

commands:
  eval    re-grade stored executions against new criteria; exit 1 under a pass-rate bar

Run "clockwork eval -h" for its flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return evalcli.ExitError
	}
	switch args[0] {
	case "eval":
		return evalcli.Run(ctx, args[1:], stdout, stderr, os.Getenv)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "clockwork: unknown command %q\n\n%s", args[0], usage)
	return evalcli.ExitError
}
