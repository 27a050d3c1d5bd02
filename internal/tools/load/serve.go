package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
)

// The throughput table measures servers in child processes (this same
// binary run with -serve), so that the CPU time each one spends per request
// is read from the kernel apart from the load generator's.

var serveKind = flag.String("serve", "", "internal: run as the child server of the throughput table (ceiling or clockwork) and print its address")

// newServer is the listener setup every measured server shares, the one
// functions/local serves the API with.
func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
}

// ceilingHandler is the HTTP+JSON ceiling: it checks the bearer token,
// reads and decodes the same JSON body an operation sends (bounded as the
// API bounds it) and answers a small JSON. Nothing is stored.
func ceilingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"title":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		var v any
		if err == nil {
			err = json.Unmarshal(b, &v)
		}
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"title":"bad request"}`))
			return
		}
		w.Write([]byte(`{"ok":true}`))
	})
}

// serveChild runs the server kind on a loopback port, prints the address
// on stdout and serves until its standard input closes (the parent ended).
func serveChild(kind, dir string) error {
	var h http.Handler
	var closeApp func() error
	switch kind {
	case "ceiling":
		h = ceilingHandler()
	case "clockwork":
		app.TuneGC() // as functions/local runs it
		authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "load", Scopes: auth.AllScopes, Agents: []string{"*"}}})
		a, err := app.Start(app.Config{DataDir: dir, Auth: authn, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			AllowPrivateAgents: true, Sender: nullSender{}})
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/", a.Handler)
		// The parent asks, after each phase, whether the change feed has
		// caught up, so that the CPU the feed spends on a phase's commits
		// is counted in that phase.
		mux.HandleFunc("GET /_load/feed-drained", func(w http.ResponseWriter, r *http.Request) {
			ch, err := a.Store.ReadFeed(r.Context(), 1)
			if err != nil || len(ch) > 0 {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		h, closeApp = mux, a.Close
	default:
		return fmt.Errorf("-serve %q: want ceiling or clockwork", kind)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := newServer(h)
	go srv.Serve(ln)
	fmt.Println(ln.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	if closeApp != nil {
		return closeApp()
	}
	return nil
}

// child is a server started with -serve.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startChild starts this binary as a server of kind, with its store (if
// any) under dir, and waits for its address.
func startChild(kind, dir string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-serve", kind, "-data", dir}
	if kind == "clockwork" && *serverCPU != "" {
		args = append(args, "-cpuprofile", *serverCPU)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("%s server did not start: %w", kind, err)
	}
	return &child{cmd: cmd, stdin: stdin, url: "http://" + strings.TrimSpace(line)}, nil
}

// waitFeed waits (up to a minute) until a clockwork child's change feed
// is drained; for the ceiling it returns at once.
func (c *child) waitFeed() {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		res, err := http.Get(c.url + "/_load/feed-drained")
		if err != nil {
			return
		}
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			return
		}
	}
}

// cpu is the child's CPU time so far (user and system).
func (c *child) cpu() time.Duration { return processCPU(c.cmd.Process.Pid) }

// stop ends the child gracefully (its store closes cleanly).
func (c *child) stop() {
	c.stdin.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}
