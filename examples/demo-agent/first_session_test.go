//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestREADMEFirstSession runs the shell blocks of the README's "A first
// session" as written, with bash from the repository root, against binaries
// built from this repository, and checks the loop the section promises: the
// demo agent prints the lapse of inv-42-paid, the fact satisfies inv-43-paid,
// and the records say so. The only changes to the blocks are the explicit
// substitutions below (each text must occur exactly once in the section).
func TestREADMEFirstSession(t *testing.T) {
	needTools(t, "the README's first session", "bash", "curl", "date", "mktemp")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := firstSession(t, string(readme))
	blocks := shellBlocks(section)
	if len(blocks) != 5 {
		t.Fatalf("the first session has %d sh blocks, want 5 (server, demo agent, register and raise, fact, records):\n%q", len(blocks), blocks)
	}

	bin := buildBinaries(t, root)
	// The server listens on a free port rather than 8080, which a developer
	// may be using; TMPDIR keeps the block's mktemp store inside the test.
	env := append(os.Environ(), "TMPDIR="+t.TempDir())
	substitute := substituter(t, section, blocks)
	substitute("go run ./functions/local", filepath.Join(bin, "local")+" -addr 127.0.0.1:0")
	substitute("go run ./examples/demo-agent", filepath.Join(bin, "demo-agent"))

	server := startBlock(t, root, env, blocks[0])
	urlLine := server.out.waitFor(t, "the server's address", 60*time.Second, regexp.MustCompile(`^clockwork listening on (http://\S+)`))
	tokenLine := server.out.waitFor(t, "the server's token", 60*time.Second, regexp.MustCompile(`^token \(every scope, every agent; printed once\): (\S+)$`))
	substitute("CLOCKWORK=http://127.0.0.1:8080", "CLOCKWORK="+urlLine[1])
	substitute("TOKEN=...", "TOKEN="+tokenLine[1])

	agent := startBlock(t, root, env, blocks[1])
	agent.out.waitFor(t, "the demo agent to listen", 60*time.Second, regexp.MustCompile(`^demo-agent listening on `))

	sh := startShell(t, root, env)
	raised := sh.run(t, blocks[2])
	if !strings.Contains(raised, `"expectationId":"inv-42-paid"`) || !strings.Contains(raised, `"expectationId":"inv-43-paid"`) {
		t.Fatalf("registering and raising answered:\n%s", raised)
	}

	lapse := agent.out.waitFor(t, "the lapse of inv-42-paid at the demo agent", 90*time.Second,
		regexp.MustCompile(`^lapse: inv-42-paid is overdue \(invoice 42: "invoice 42 is paid", .*; skill handle-lapse, context ctx-1, origin task task-1, this task (\S+)$`))

	var facts struct {
		Facts []struct {
			FactKey   string   `json:"factKey"`
			Satisfied []string `json:"satisfied"`
		} `json:"facts"`
	}
	factOut := sh.run(t, blocks[3])
	if err := json.Unmarshal([]byte(factOut), &facts); err != nil || len(facts.Facts) != 1 ||
		facts.Facts[0].FactKey != "invoice.43.paid" || strings.Join(facts.Facts[0].Satisfied, ",") != "inv-43-paid" {
		t.Fatalf("the fact answered (%v):\n%s", err, factOut)
	}

	// The watcher stores lapseTaskId when the agent's answer arrives, just
	// after the agent printed the lapse, so read the records until it is there.
	type record struct {
		State       string `json:"state"`
		LapseTaskID string `json:"lapseTaskId"`
		Lapse       *struct {
			Lapse string `json:"lapse"`
		} `json:"lapse"`
		Expectation struct {
			ExpectationID string `json:"expectationId"`
		} `json:"expectation"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := sh.run(t, blocks[4])
		var list struct {
			Records []record `json:"records"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("the records block answered %v:\n%s", err, out)
		}
		byID := map[string]record{}
		for _, r := range list.Records {
			byID[r.Expectation.ExpectationID] = r
		}
		r42, r43 := byID["inv-42-paid"], byID["inv-43-paid"]
		if r42.LapseTaskID == "" && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if r42.State != "lapsed" || r42.Lapse == nil || r42.Lapse.Lapse != "overdue" || r42.LapseTaskID != lapse[1] {
			t.Errorf("inv-42-paid is %+v, want lapsed overdue with lapseTaskId %s (the demo agent's task)\n%s", r42, lapse[1], out)
		}
		if r43.State != "satisfied" {
			t.Errorf("inv-43-paid is %+v, want satisfied\n%s", r43, out)
		}
		break
	}

	// "Monitor a cron job": its three lines, in the same shell, with a
	// backup that succeeds.
	cron := readmeSection(t, string(readme), "Monitor a cron job")
	cronBlocks := shellBlocks(cron)
	if len(cronBlocks) != 1 || strings.Count(strings.TrimSpace(cronBlocks[0]), "\n") != 2 {
		t.Fatalf("\"Monitor a cron job\" has %d sh blocks, want one of three lines:\n%q", len(cronBlocks), cronBlocks)
	}
	substituter(t, cron, cronBlocks)("./backup.sh", "true")
	var hb struct {
		Status, NextDueAt, ExpectationID string
	}
	pinged := sh.run(t, cronBlocks[0])
	if i := strings.LastIndex(pinged, "{\"name\""); i < 0 || json.Unmarshal([]byte(pinged[i:]), &hb) != nil || hb.Status != "up" || hb.NextDueAt == "" || hb.ExpectationID != "hb:nightly-backup:1" {
		t.Fatalf("the cron job's ping answered %+v:\n%s", hb, pinged)
	}
}

// readmeSection returns the README's section under "## " + title.
func readmeSection(t *testing.T, readme, title string) string {
	t.Helper()
	heading := "\n## " + title + "\n"
	i := strings.Index(readme, heading)
	if i < 0 {
		t.Fatalf("README.md has no %q section", "## "+title)
	}
	out := readme[i+len(heading):]
	if j := strings.Index(out, "\n## "); j >= 0 {
		out = out[:j]
	}
	return out
}

// needTools skips t without one of tools (fails it when CI=true).
func needTools(t *testing.T, what string, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed to run %s: %v", tool, what, err)
			}
			t.Skipf("%s not found (CI=true makes this a failure): %v", tool, err)
		}
	}
}

// buildBinaries builds the server and the demo agent into a temporary
// directory and returns it.
func buildBinaries(t *testing.T, root string) string {
	t.Helper()
	bin := t.TempDir()
	for _, pkg := range []string{"functions/local", "examples/demo-agent"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, filepath.Base(pkg)), "./"+pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	return bin
}

// substituter returns the one change a test makes to the shell blocks of
// text: each from must occur exactly once in text, and is replaced in the
// blocks.
func substituter(t *testing.T, text string, blocks []string) func(from, to string) {
	return func(from, to string) {
		t.Helper()
		if n := strings.Count(text, from); n != 1 {
			t.Fatalf("the page has %q %d times, want once", from, n)
		}
		for i := range blocks {
			blocks[i] = strings.Replace(blocks[i], from, to, 1)
		}
	}
}

// firstSession returns the README's "A first session" section.
func firstSession(t *testing.T, readme string) string {
	t.Helper()
	const heading = "\n## A first session\n"
	i := strings.Index(readme, heading)
	if i < 0 {
		t.Fatal("README.md has no \"## A first session\" section")
	}
	section := readme[i+len(heading):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	return section
}

// shellBlocks returns the contents of the section's ```sh fenced blocks.
func shellBlocks(section string) []string {
	var blocks []string
	var cur *strings.Builder
	for line := range strings.SplitSeq(section, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```sh":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return blocks
}

// lines collects a process's output lines for waitFor.
type lines struct {
	mu      sync.Mutex
	all     []string
	done    bool
	changed chan struct{}
}

func newLines(r io.Reader) *lines {
	l := &lines{changed: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.add(sc.Text(), false)
		}
		l.add("", true)
	}()
	return l
}

func (l *lines) add(line string, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if done {
		l.done = true
	} else {
		l.all = append(l.all, line)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *lines) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n")
}

// waitFor waits until a line matches re and returns its submatches; it fails
// the test when the output ends or the generous deadline passes first.
func (l *lines) waitFor(t *testing.T, what string, timeout time.Duration, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		l.mu.Lock()
		for ; seen < len(l.all); seen++ {
			if m := re.FindStringSubmatch(l.all[seen]); m != nil {
				l.mu.Unlock()
				return m
			}
		}
		done, changed := l.done, l.changed
		l.mu.Unlock()
		if done {
			t.Fatalf("waiting for %s: the output ended:\n%s", what, l)
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waiting for %s: nothing after %s:\n%s", what, timeout, l)
		}
	}
}

// process is a block running in the background, as in its own terminal.
type process struct {
	out    *lines
	stderr *bytes.Buffer
}

// startBlock runs a block with bash in its own process group, stopped with
// SIGTERM (SIGKILL after 10 s) when the test ends.
func startBlock(t *testing.T, dir string, env []string, block string) *process {
	t.Helper()
	cmd := exec.Command("bash", "-c", block)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &process{stderr: &bytes.Buffer{}}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.out = newLines(stdout)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		kill := time.AfterFunc(10*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		defer kill.Stop()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%q wrote on stderr:\n%s", block, p.stderr)
		}
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// shell is one bash reading blocks on its standard input, as the user's
// terminal does, so variables set by one block serve the next. It runs with
// set -e so that a failing command (curl --fail-with-body on an error
// status) ends it and fails the test.
type shell struct {
	stdin io.WriteCloser
	out   *lines
	proc  *process
	n     int
}

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	cmd := exec.Command("bash")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &bytes.Buffer{}
	cmd.Stderr = &lockedWriter{w: stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &shell{stdin: stdin, out: newLines(stdout), proc: &process{stderr: stderr}}
	t.Cleanup(func() {
		stdin.Close()
		kill := time.AfterFunc(10*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		defer kill.Stop()
		_ = cmd.Wait()
	})
	if _, err := io.WriteString(stdin, "set -e\n"); err != nil {
		t.Fatal(err)
	}
	return s
}

// run feeds the block to the shell and returns what it printed.
func (s *shell) run(t *testing.T, block string) string {
	t.Helper()
	s.n++
	marker := fmt.Sprintf("--- end of block %d ---", s.n)
	before := s.out.count()
	if _, err := io.WriteString(s.stdin, block+"\necho\necho '"+marker+"'\n"); err != nil {
		t.Fatalf("write block to bash: %v", err)
	}
	s.out.mu.Lock()
	done := s.out.done
	s.out.mu.Unlock()
	if done {
		t.Fatalf("bash ended before the block:\n%s\nstderr:\n%s", block, s.proc.stderr)
	}
	func() {
		defer func() {
			if t.Failed() {
				t.Logf("bash stderr:\n%s", s.proc.stderr)
			}
		}()
		s.out.waitFor(t, "the block to finish:\n"+block, 60*time.Second, regexp.MustCompile("^"+regexp.QuoteMeta(marker)+"$"))
	}()
	s.out.mu.Lock()
	out := slices.Clone(s.out.all[before:])
	s.out.mu.Unlock()
	// The last line is the marker.
	return strings.TrimSpace(strings.Join(out[:len(out)-1], "\n"))
}
