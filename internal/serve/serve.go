// Package serve decides how the local server (functions/local) listens:
// on loopback without a tokens file, beyond it only with one, and beyond it
// only over TLS (a certificate it reloads when its files change) or behind a
// TLS proxy that says so in X-Forwarded-Proto, so that bearer tokens never
// cross a network in clear. It also decides whether outbound calls may
// reach private addresses by default: only in the first session on
// loopback, never once the server holds other people's tokens.
package serve

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// Listen is how the server was asked to listen.
type Listen struct {
	// Addr is the host:port to listen on.
	Addr string
	// Tokens is true when a tokens file was given.
	Tokens bool
	// CertFile and KeyFile are PEM files of the server's certificate
	// (chain) and key; both or neither.
	CertFile, KeyFile string
	// BehindProxy states that a TLS proxy terminates in front: requests
	// must then carry X-Forwarded-Proto: https, and the client's address is
	// the one the proxy appended to X-Forwarded-For.
	BehindProxy bool
}

// Loopback reports whether Addr is a loopback address (or "localhost").
func (l Listen) Loopback() bool {
	host, _, err := net.SplitHostPort(l.Addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// TLS reports whether the server itself terminates TLS.
func (l Listen) TLS() bool { return l.CertFile != "" }

// Check returns an error naming the flag when the combination is unsafe or
// incomplete: a non-loopback address without a tokens file, or without TLS
// or -behind-proxy; a certificate without its key or the other way round.
func (l Listen) Check() error {
	if _, _, err := net.SplitHostPort(l.Addr); err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	if (l.CertFile == "") != (l.KeyFile == "") {
		return errors.New("-tls-cert and -tls-key go together")
	}
	if l.Loopback() {
		return nil
	}
	if !l.Tokens {
		return fmt.Errorf("-addr %s is not loopback: give -tokens to listen beyond this machine", l.Addr)
	}
	if !l.TLS() && !l.BehindProxy {
		return fmt.Errorf("-addr %s is not loopback: bearer tokens would cross the network in clear; give -tls-cert and -tls-key, or -behind-proxy when a TLS proxy terminates in front", l.Addr)
	}
	return nil
}

// PrivateByDefault is the default of -allow-private-agents and
// -allow-private-judge: true only for the first session (no tokens file,
// loopback), where the agents under test run on this machine. With a
// tokens file any tenant could otherwise make the server call loopback and
// private services.
func (l Listen) PrivateByDefault() bool { return !l.Tokens && l.Loopback() }

// Scheme is "https" when the server terminates TLS, else "http".
func (l Listen) Scheme() string {
	if l.TLS() {
		return "https"
	}
	return "http"
}

// Wrap returns ln as the server should accept on it: over TLS 1.2 or later
// with a certificate reloaded when its files change, when l has one. The
// certificate must load now (an error names the file).
func (l Listen) Wrap(ln net.Listener, log *slog.Logger) (net.Listener, error) {
	if !l.TLS() {
		return ln, nil
	}
	c, err := NewCertReloader(l.CertFile, l.KeyFile, log)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}), nil
}

// Handler returns next as the server should serve it: behind a proxy, a
// request whose X-Forwarded-Proto is not https is refused (403) before any
// handler reads its token, and the request's RemoteAddr becomes the client
// address the proxy appended to X-Forwarded-For. /healthz stays open for
// the proxy's checks.
func (l Listen) Handler(next http.Handler) http.Handler {
	if !l.BehindProxy {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && !forwardedHTTPS(r.Header) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{
				"type": "https://clockwork.dev/problems/forbidden", "title": "Forbidden", "status": http.StatusForbidden,
				"detail": "this server is behind a TLS proxy (-behind-proxy): requests must arrive over HTTPS, with X-Forwarded-Proto: https",
			})
			return
		}
		if client, ok := forwardedClient(r.Header); ok {
			r = r.Clone(r.Context())
			r.RemoteAddr = client
		}
		next.ServeHTTP(w, r)
	})
}

// lastForwarded returns the last element of a forwarding header: the one
// the proxy in front of this server appended. The elements before it came
// with the request, from the client or proxies further out, and a client
// may write anything there.
func lastForwarded(h http.Header, name string) string {
	v := h.Values(name)
	if len(v) == 0 {
		return ""
	}
	last := v[len(v)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return strings.TrimSpace(last)
}

// forwardedHTTPS reports whether the proxy says the client spoke HTTPS to
// it: the protocol it appended to X-Forwarded-Proto.
func forwardedHTTPS(h http.Header) bool {
	return strings.EqualFold(lastForwarded(h, "X-Forwarded-Proto"), "https")
}

// forwardedClient returns the client address the proxy appended to
// X-Forwarded-For (as host:port with port 0), and false when there is none
// or it is not an IP address.
func forwardedClient(h http.Header) (string, bool) {
	ip, err := netip.ParseAddr(lastForwarded(h, "X-Forwarded-For"))
	if err != nil {
		return "", false
	}
	return netip.AddrPortFrom(ip, 0).String(), true
}

// CertReloader serves a certificate from PEM files and loads them again
// when either changes (size or modification time), so a renewed
// certificate needs no restart. A renewal that does not load (say, the
// certificate written before its key) keeps the previous pair until both
// load.
type CertReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

// NewCertReloader loads the pair now; an error names the file.
func NewCertReloader(certFile, keyFile string, log *slog.Logger) (*CertReloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &CertReloader{certFile: certFile, keyFile: keyFile, log: log}
	stamp, err := c.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert %s, -tls-key %s: %w", certFile, keyFile, err)
	}
	c.cert, c.stamp, c.checked = &cert, stamp, time.Now()
	return c, nil
}

// recheck bounds how often a handshake looks at the files.
const recheck = time.Second

// GetCertificate is tls.Config's GetCertificate.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) < recheck {
		return c.cert, nil
	}
	c.checked = time.Now()
	stamp, err := c.fileStamp()
	if err != nil || stamp == c.stamp {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		c.log.Warn("the changed TLS certificate does not load; serving the previous one", "cert", c.certFile, "err", err)
		return c.cert, nil
	}
	c.cert, c.stamp = &cert, stamp
	c.log.Info("TLS certificate reloaded", "cert", c.certFile)
	return c.cert, nil
}

func (c *CertReloader) fileStamp() (string, error) {
	var b strings.Builder
	for _, f := range []string{c.certFile, c.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}
