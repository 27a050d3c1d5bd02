// Command demo-agent is the smallest A2A agent that gets lapse tasks from
// clockwork: the official A2A Go SDK's server speaking A2A 1.0 JSON-RPC on
// loopback, printing every lapse task it receives and answering each with a
// completed task. Its card is examples/card.json (whose url is this agent's
// default address); the README's "A first session" runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// extensionURI is the A2A Expectations extension: the key of the lapse in a
// lapse task's message metadata and the value of the activation header.
const extensionURI = "https://rsaxb.com/a2a/expectations/v1"

// rpcPath is where the agent serves JSON-RPC; examples/card.json names it.
const rpcPath = "/a2a"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:7707", "loopback address to listen on (examples/card.json names 127.0.0.1:7707)")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr %s is not a loopback address", *addr)
	}

	handler := a2asrv.NewHandler(executor{}, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))
	mux := http.NewServeMux()
	mux.Handle(rpcPath, echoExtension(a2asrv.NewJSONRPCHandler(handler)))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("demo-agent listening on http://%s%s\n", ln.Addr(), rpcPath)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// echoExtension answers the A2A-Extensions header with the extension when
// the request activated it, as the extension asks of agents (the SDK's
// JSON-RPC transport does not echo activated extensions itself).
func echoExtension(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(strings.Join(r.Header.Values("A2A-Extensions"), ","), extensionURI) {
			w.Header().Set("A2A-Extensions", extensionURI)
		}
		next.ServeHTTP(w, r)
	})
}

// lapse is the part of the extension's Lapse the agent prints in its
// one-line summary; the whole metadata is printed after it.
type lapse struct {
	ExpectationID string `json:"expectationId"`
	Subject       struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"subject"`
	Expects  string `json:"expects"`
	Lapse    string `json:"lapse"`
	DueAt    string `json:"dueAt"`
	LapsedAt string `json:"lapsedAt"`
}

// executor prints each message and completes a task for it.
type executor struct{}

// Execute implements a2asrv.AgentExecutor: it prints the message's lapse
// (metadata keyed by the extension URI) and answers with a completed task.
func (executor) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		reply := describe(execCtx)
		if execCtx.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
				return
			}
		}
		answer := a2a.NewMessageForTask(a2a.MessageRoleAgent, execCtx, a2a.NewTextPart(reply))
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, answer), nil)
	}
}

// Cancel implements a2asrv.AgentExecutor.
func (executor) Cancel(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

// describe prints what the message carries and returns the reply text.
func describe(execCtx *a2asrv.ExecutorContext) string {
	msg := execCtx.Message
	if msg == nil {
		fmt.Printf("task %s: no message\n", execCtx.TaskID)
		return "no message"
	}
	raw, ok := msg.Metadata[extensionURI]
	if !ok {
		fmt.Printf("task %s: a message without a lapse (context %s)\n", execCtx.TaskID, msg.ContextID)
		return "no lapse in this message"
	}
	meta, err := json.Marshal(raw)
	if err != nil {
		fmt.Printf("task %s: unreadable lapse metadata: %v\n", execCtx.TaskID, err)
		return "unreadable lapse"
	}
	var got struct {
		Lapse lapse  `json:"lapse"`
		Skill string `json:"skill"`
	}
	if err := json.Unmarshal(meta, &got); err != nil {
		fmt.Printf("task %s: unreadable lapse metadata: %v\n", execCtx.TaskID, err)
		return "unreadable lapse"
	}
	var origin []string
	for _, id := range msg.ReferenceTasks {
		origin = append(origin, string(id))
	}
	l := got.Lapse
	fmt.Printf("lapse: %s is %s (%s %s: %q, due %s, lapsed %s); skill %s, context %s, origin task %s, this task %s\n",
		l.ExpectationID, l.Lapse, l.Subject.Type, l.Subject.ID, l.Expects, l.DueAt, l.LapsedAt,
		got.Skill, msg.ContextID, strings.Join(origin, ","), execCtx.TaskID)
	fmt.Printf("  metadata[%s] = %s\n", extensionURI, meta)
	return "noted: " + l.ExpectationID + " is " + l.Lapse
}
