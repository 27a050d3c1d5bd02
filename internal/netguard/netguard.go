// Package netguard refuses outbound connections to addresses an agent URL
// must not reach: loopback, private, link-local (including the cloud metadata
// address 169.254.169.254), unspecified, multicast, carrier-grade NAT and
// other special-purpose ranges, in plain and IPv4-mapped or IPv4-embedding
// IPv6 forms.
//
// The check runs in the dialer's Control function, that is on the IP address
// of every connection actually made, after DNS resolution. A host name that
// resolves (or re-resolves, as in DNS rebinding) to a refused address is
// therefore refused too, and so is every hop of a redirect.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// ErrRefused is matched (with errors.Is) by every error the guard returns
// when it refuses a connection. Such an error is permanent: retrying the same
// address cannot succeed unless the guard's configuration changes.
var ErrRefused = errors.New("netguard: address refused")

// ErrTooManyRedirects is matched (with errors.Is) by the error a guarded
// client returns when a request is redirected more than MaxRedirects times.
var ErrTooManyRedirects = errors.New("netguard: too many redirects")

// MaxRedirects is the number of redirects a guarded client follows.
const MaxRedirects = 3

// Guard says which addresses may be dialled. The zero value refuses every
// special-purpose address and allows public unicast addresses.
type Guard struct {
	// AllowPrivate turns the guard off: every address is allowed.
	AllowPrivate bool
	// Allow lists prefixes that are allowed even though they fall in a
	// refused range (for example a VPC subnet that hosts agents).
	Allow []netip.Prefix
}

// RefusedError is the error returned for a refused address. It matches
// ErrRefused with errors.Is.
type RefusedError struct {
	// Addr is the address that was refused (as dialled).
	Addr netip.Addr
	// Reason names the refused range, for example "loopback".
	Reason string
}

// Error describes the refusal.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("netguard: address %s refused (%s)", e.Addr, e.Reason)
}

// Is reports whether target is ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

type rangeRule struct {
	prefix netip.Prefix
	reason string
}

// refused lists the ranges refused unless allowed. IPv4-mapped addresses are
// unmapped before the check; NAT64, IPv4-translated, 6to4 and Teredo
// addresses are checked against the IPv4 addresses they embed.
var refused = func() []rangeRule {
	list := []struct{ p, reason string }{
		{"0.0.0.0/8", "unspecified or this-network"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "carrier-grade NAT"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "IETF protocol assignment"},
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved or broadcast"},
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible (deprecated)"},
		{"64:ff9b:1::/48", "local-use NAT64"},
		{"100::/64", "discard-only"},
		{"2001:db8::/32", "documentation"},
		{"fc00::/7", "unique local (private)"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local (deprecated)"},
		{"ff00::/8", "multicast"},
	}
	out := make([]rangeRule, len(list))
	for i, r := range list {
		out[i] = rangeRule{prefix: netip.MustParsePrefix(r.p), reason: r.reason}
	}
	return out
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// teredo addresses (RFC 4380) carry the Teredo server's IPv4 in bits
	// 32-63 and the client's, every bit inverted, in the last 32.
	teredo = netip.MustParsePrefix("2001::/32")
	// siit addresses (IPv4-translated, RFC 2765) carry an IPv4 in their
	// last 32 bits.
	siit = netip.MustParsePrefix("::ffff:0:0:0/96")
)

// Check returns nil when the guard allows a connection to addr and a
// *RefusedError (matching ErrRefused) when it does not. An invalid addr is
// refused.
func (g Guard) Check(addr netip.Addr) error {
	if g.AllowPrivate {
		return nil
	}
	if !addr.IsValid() {
		return &RefusedError{Addr: addr, Reason: "invalid address"}
	}
	addr = addr.WithZone("")
	if g.allowed(addr) {
		return nil
	}
	reason := classify(addr.Unmap())
	if reason == "" {
		return nil
	}
	if g.allowed(addr.Unmap()) {
		return nil
	}
	return &RefusedError{Addr: addr, Reason: reason}
}

func (g Guard) allowed(addr netip.Addr) bool {
	for _, p := range g.Allow {
		if p.IsValid() && p.Contains(addr) {
			return true
		}
	}
	return false
}

// classify returns why addr is refused, or "" when it is a public address.
func classify(addr netip.Addr) string {
	for _, r := range refused {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	if addr.Is6() {
		b := addr.As16()
		var embedded [][4]byte
		switch {
		case nat64.Contains(addr), siit.Contains(addr):
			embedded = append(embedded, [4]byte(b[12:16]))
		case sixToFour.Contains(addr):
			embedded = append(embedded, [4]byte(b[2:6]))
		case teredo.Contains(addr):
			client := [4]byte(b[12:16])
			for i := range client {
				client[i] ^= 0xff
			}
			embedded = append(embedded, client, [4]byte(b[4:8]))
		}
		for _, v4 := range embedded {
			if reason := classify(netip.AddrFrom4(v4)); reason != "" {
				return reason + " (embedded IPv4)"
			}
		}
	}
	return ""
}

// CheckAddress checks a dialled "host:port" address whose host is an IP
// literal, as passed to a net.Dialer Control function. An address that is
// not an IP literal is refused (the dialer always passes resolved addresses).
func (g Guard) CheckAddress(address string) error {
	if g.AllowPrivate {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return &RefusedError{Reason: fmt.Sprintf("not an IP address: %q", address)}
	}
	return g.Check(addr)
}

// Control is a net.Dialer Control function enforcing the guard on the
// resolved address of each connection. It returns a *RefusedError (matching
// ErrRefused) for a refused address and never touches the socket otherwise.
func (g Guard) Control(network, address string, _ syscall.RawConn) error {
	return g.CheckAddress(address)
}

// NewHTTPClient returns an HTTP client whose every connection, including
// those made while following redirects, passes through the guard. The client
// ignores proxy environment variables (a proxy would hide the real
// destination from the check), follows at most MaxRedirects redirects (more
// fail with an error matching ErrTooManyRedirects), and has the given overall
// request timeout (0 means none). Requests to refused addresses fail with an
// error matching ErrRefused. It never panics.
func NewHTTPClient(g Guard, timeout time.Duration) *http.Client {
	g.Allow = append([]netip.Prefix(nil), g.Allow...)
	dialer := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		Control:   g.Control,
	}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		ResponseHeaderTimeout: 0,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > MaxRedirects {
				return fmt.Errorf("%w: stopped after %d", ErrTooManyRedirects, MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: redirect to scheme %q", ErrRefused, req.URL.Scheme)
			}
			return nil
		},
	}
}
