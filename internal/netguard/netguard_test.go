package netguard

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00:1::/32")}
	tests := []struct {
		addr    string
		guard   Guard
		refused bool
	}{
		// public
		{"8.8.8.8", Guard{}, false},
		{"1.1.1.1", Guard{}, false},
		{"2606:4700:4700::1111", Guard{}, false},
		{"::ffff:8.8.8.8", Guard{}, false},
		{"64:ff9b::808:808", Guard{}, false},
		{"2002:808:808::1", Guard{}, false},
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", Guard{}, false},
		{"::ffff:0:808:808", Guard{}, false},
		{"100.63.255.255", Guard{}, false},
		{"100.128.0.0", Guard{}, false},
		{"172.32.0.1", Guard{}, false},
		{"11.0.0.1", Guard{}, false},
		// loopback
		{"127.0.0.1", Guard{}, true},
		{"127.255.255.254", Guard{}, true},
		{"::1", Guard{}, true},
		// private
		{"10.0.0.1", Guard{}, true},
		{"172.16.0.1", Guard{}, true},
		{"172.31.255.255", Guard{}, true},
		{"192.168.1.1", Guard{}, true},
		{"fc00::1", Guard{}, true},
		{"fd12:3456::1", Guard{}, true},
		// link-local and metadata
		{"169.254.169.254", Guard{}, true},
		{"169.254.0.1", Guard{}, true},
		{"fe80::1", Guard{}, true},
		{"fe80::1%eth0", Guard{}, true},
		{"febf::1", Guard{}, true},
		// unspecified
		{"0.0.0.0", Guard{}, true},
		{"::", Guard{}, true},
		// multicast and broadcast
		{"224.0.0.1", Guard{}, true},
		{"239.255.255.250", Guard{}, true},
		{"255.255.255.255", Guard{}, true},
		{"ff02::1", Guard{}, true},
		// CGNAT
		{"100.64.0.1", Guard{}, true},
		{"100.127.255.255", Guard{}, true},
		// IPv4-mapped and embedded forms
		{"::ffff:127.0.0.1", Guard{}, true},
		{"::ffff:10.0.0.1", Guard{}, true},
		{"::ffff:169.254.169.254", Guard{}, true},
		{"::ffff:100.64.0.1", Guard{}, true},
		{"::127.0.0.1", Guard{}, true},
		{"64:ff9b::7f00:1", Guard{}, true},
		{"64:ff9b::a9fe:a9fe", Guard{}, true},
		{"2002:7f00:1::1", Guard{}, true},
		{"2002:c0a8:101::1", Guard{}, true},
		// Teredo: the client's IPv4 inverted in the last 32 bits
		// (127.0.0.1, 10.0.0.1, 169.254.169.254), or a private server's
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", Guard{}, true},
		{"2001:0:4136:e378:8000:63bf:f5ff:fffe", Guard{}, true},
		{"2001:0:4136:e378:8000:63bf:5601:5601", Guard{}, true},
		{"2001:0:a00:1:0:0:f7f7:f7f7", Guard{}, true},
		// IPv4-translated (SIIT)
		{"::ffff:0:7f00:1", Guard{}, true},
		{"::ffff:0:a9fe:a9fe", Guard{}, true},
		// invalid
		{"", Guard{}, true},
		// AllowPrivate
		{"127.0.0.1", Guard{AllowPrivate: true}, false},
		{"169.254.169.254", Guard{AllowPrivate: true}, false},
		{"::1", Guard{AllowPrivate: true}, false},
		// Allow list
		{"10.1.2.3", Guard{Allow: allow}, false},
		{"::ffff:10.1.2.3", Guard{Allow: allow}, false},
		{"10.2.0.1", Guard{Allow: allow}, true},
		{"fd00:1::5", Guard{Allow: allow}, false},
		{"fd00:2::5", Guard{Allow: allow}, true},
		{"127.0.0.1", Guard{Allow: []netip.Prefix{{}}}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v/%d", tt.addr, tt.guard.AllowPrivate, len(tt.guard.Allow)), func(t *testing.T) {
			var addr netip.Addr
			if tt.addr != "" {
				addr = netip.MustParseAddr(tt.addr)
			}
			err := tt.guard.Check(addr)
			if got := err != nil; got != tt.refused {
				t.Fatalf("Check(%s) = %v, want refused=%v", tt.addr, err, tt.refused)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Fatalf("error %v does not match ErrRefused", err)
			}
		})
	}
}

func TestCheckAddress(t *testing.T) {
	tests := []struct {
		address string
		refused bool
	}{
		{"127.0.0.1:80", true},
		{"[::1]:443", true},
		{"[fe80::1%eth0]:80", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"8.8.8.8:53", false},
		{"[2606:4700:4700::1111]:443", false},
		{"example.com:80", true}, // not resolved: fail closed
		{"garbage", true},
		{"", true},
	}
	for _, tt := range tests {
		err := Guard{}.CheckAddress(tt.address)
		if got := err != nil; got != tt.refused {
			t.Errorf("CheckAddress(%q) = %v, want refused=%v", tt.address, err, tt.refused)
		}
		if err != nil && !errors.Is(err, ErrRefused) {
			t.Errorf("CheckAddress(%q): %v does not match ErrRefused", tt.address, err)
		}
	}
}

func TestHTTPClientLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()

	guarded := NewHTTPClient(Guard{}, 5*time.Second)
	resp, err := guarded.Get(srv.URL)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("guarded client reached a loopback server")
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("error %v does not match ErrRefused", err)
	}

	// "localhost" resolves to loopback: refused after resolution.
	localhostURL := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if _, err := guarded.Get(localhostURL); !errors.Is(err, ErrRefused) {
		t.Fatalf("localhost: error %v does not match ErrRefused", err)
	}

	open := NewHTTPClient(Guard{AllowPrivate: true}, 5*time.Second)
	resp, err = open.Get(srv.URL)
	if err != nil {
		t.Fatalf("AllowPrivate client: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}

	allowed := NewHTTPClient(Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, 5*time.Second)
	resp, err = allowed.Get(srv.URL)
	if err != nil {
		t.Fatalf("Allow client: %v", err)
	}
	_ = resp.Body.Close()
}

// TestHTTPClientRedirect checks that a redirect from an allowed host to a
// refused one is refused by the dialer, and that redirects are capped.
func TestHTTPClientRedirect(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("secret"))
	}))
	defer target.Close()
	// The first hop (127.0.0.1) is allowed through an Allow prefix; it
	// redirects to 127.0.0.2, which is loopback and not allowed.
	hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(target.URL, "127.0.0.1", "127.0.0.2", 1), http.StatusFound)
	}))
	defer hop.Close()
	c := NewHTTPClient(Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, 5*time.Second)
	resp, err := c.Get(hop.URL)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("redirect to a refused address was followed")
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("redirect: error %v does not match ErrRefused", err)
	}

	// Redirect loop: capped.
	var loop *httptest.Server
	loop = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, loop.URL+"/again", http.StatusFound)
	}))
	defer loop.Close()
	open := NewHTTPClient(Guard{AllowPrivate: true}, 5*time.Second)
	resp, err = open.Get(loop.URL)
	if err == nil {
		_ = resp.Body.Close()
		t.Fatal("redirect loop followed without error")
	}
	if !errors.Is(err, ErrTooManyRedirects) {
		t.Fatalf("loop: error %v does not match ErrTooManyRedirects", err)
	}

	// Three redirects are followed.
	var count atomic.Int32
	var three *httptest.Server
	three = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if count.Add(1) <= MaxRedirects {
			http.Redirect(w, r, three.URL, http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("done"))
	}))
	defer three.Close()
	resp, err = open.Get(three.URL)
	if err != nil {
		t.Fatalf("%d redirects: %v", MaxRedirects, err)
	}
	_ = resp.Body.Close()
}
