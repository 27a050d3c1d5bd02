// Command clockwork-verify checks an evidence bundle offline: no server,
// no AWS, no network. Fetch a bundle with
//
//	curl -H "Authorization: Bearer $TOKEN" $API/v1/verifications/$VID/bundle > bundle.json
//
// and run
//
//	clockwork-verify [-key BASE64URL] bundle.json     (or - for standard input)
//
// It recomputes the ANTICIPATE's digest, the whole event chain, the
// VERIFY's anticipation_digest, execution_digest and d_dna_signature,
// checks server_signature against the bundle's public key (or against
// -key, the server's key obtained out of band, which the bundle's must
// equal), and grades every DETERMINISTIC criterion again from the events.
// It prints each check and exits 0 when all hold, 1 naming the first
// broken link otherwise, and 2 when the file cannot be read or the flags
// are wrong.
package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/evidence"
)

// maxBundleBytes bounds what is read: far above any bundle the API serves
// on AWS (4 MiB), and bounded so that a wrong file cannot exhaust memory.
const maxBundleBytes = 4 << 30

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("clockwork-verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyText := fs.String("key", "", "the server's Ed25519 public key, unpadded base64url as GET /v1/keys/verify gives it; the bundle's key must be this one")
	quiet := fs.Bool("q", false, "print only the outcome")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: clockwork-verify [-key BASE64URL] [-q] BUNDLE.json (- for standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	var opt evidence.Options
	if *keyText != "" {
		k, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(*keyText))
		if err != nil || len(k) != ed25519.PublicKeySize {
			fmt.Fprintf(stderr, "clockwork-verify: -key must be the unpadded base64url of a %d-byte Ed25519 public key\n", ed25519.PublicKeySize)
			return 2
		}
		opt.TrustedKey = k
	}
	raw, err := readBundle(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintf(stderr, "clockwork-verify: %v\n", err)
		return 2
	}
	start := time.Now()
	rep := evidence.Check(raw, opt)
	took := time.Since(start)
	if !*quiet {
		for _, f := range rep.Findings {
			mark := "ok    "
			if !f.OK {
				mark = "BROKEN"
			}
			fmt.Fprintf(stdout, "%s %s: %s\n", mark, f.Link, f.Detail)
		}
		for _, n := range rep.Notes {
			fmt.Fprintf(stdout, "note   %s\n", n)
		}
	}
	if b := rep.FirstBroken(); b != nil {
		fmt.Fprintf(stdout, "FAILED: the first broken link is %s: %s\n", b.Link, b.Detail)
		return 1
	}
	fmt.Fprintf(stdout, "VERIFIED: %s, score %v; %d events and %d DETERMINISTIC criteria re-checked in %s\n",
		rep.Verdict, rep.Score, rep.Events, rep.Regraded, took.Round(time.Microsecond))
	return 0
}

func readBundle(name string, stdin io.Reader) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxBundleBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBundleBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxBundleBytes)
	}
	return b, nil
}
