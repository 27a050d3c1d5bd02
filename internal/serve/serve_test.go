package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name    string
		l       Listen
		wantErr string
		private bool
	}{
		{"first session", Listen{Addr: "127.0.0.1:8080"}, "", true},
		{"localhost", Listen{Addr: "localhost:8080"}, "", true},
		{"loopback with tokens", Listen{Addr: "127.0.0.1:8080", Tokens: true}, "", false},
		{"beyond loopback without tokens", Listen{Addr: "0.0.0.0:8080"}, "give -tokens", false},
		{"beyond loopback in clear", Listen{Addr: "0.0.0.0:8080", Tokens: true}, "in clear", false},
		{"beyond loopback over TLS", Listen{Addr: "0.0.0.0:8080", Tokens: true, CertFile: "c", KeyFile: "k"}, "", false},
		{"beyond loopback behind a proxy", Listen{Addr: "10.0.0.5:8080", Tokens: true, BehindProxy: true}, "", false},
		{"certificate without key", Listen{Addr: "127.0.0.1:8080", CertFile: "c"}, "go together", true},
		{"no port", Listen{Addr: "127.0.0.1"}, "-addr", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.l.Check()
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("Check: %v, want %q", err, c.wantErr)
			}
			if got := c.l.PrivateByDefault(); got != c.private {
				t.Fatalf("PrivateByDefault %v, want %v", got, c.private)
			}
		})
	}
}

// TestBehindProxyRequiresForwardedHTTPS: the protocol that counts is the
// one the trusted proxy appended (the last), not one the client wrote
// before it ("https, http" is a client that spoke plain HTTP to the proxy
// and sent the header itself).
func TestBehindProxyRequiresForwardedHTTPS(t *testing.T) {
	h := Listen{Addr: "0.0.0.0:8080", Tokens: true, BehindProxy: true}.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, c := range []struct {
		path, proto string
		want        int
	}{
		{"/v1/agents", "", http.StatusForbidden},
		{"/v1/agents", "http", http.StatusForbidden},
		{"/v1/agents", "https", http.StatusNoContent},
		{"/v1/agents", "HTTPS", http.StatusNoContent},
		{"/v1/agents", "https, http", http.StatusForbidden},
		{"/v1/agents", "http, https", http.StatusNoContent},
		{"/healthz", "", http.StatusNoContent},
	} {
		r := httptest.NewRequest("GET", c.path, nil)
		if c.proto != "" {
			r.Header.Set("X-Forwarded-Proto", c.proto)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s with X-Forwarded-Proto %q: %d, want %d", c.path, c.proto, w.Code, c.want)
		}
		if w.Code == http.StatusForbidden && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("refusal is %q", w.Header().Get("Content-Type"))
		}
	}
}

// TestTLSServesAndReloads serves HTTPS with a certificate made here, calls
// it with a real TLS client that trusts only that certificate, then writes
// a renewed certificate over the files and sees the server present it
// without a restart.
func TestTLSServesAndReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := writeCert(t, certFile, keyFile, "first")
	l := Listen{Addr: "127.0.0.1:0", Tokens: true, CertFile: certFile, KeyFile: keyFile}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", l.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := l.Wrap(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "https://" + raw.Addr().String() + "/"

	// A client that trusts the given certificate and reports the one the
	// server presented.
	get := func(trust *x509.Certificate) (string, error) {
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		var seen string
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool,
			VerifyConnection: func(cs tls.ConnectionState) error {
				seen = cs.PeerCertificates[0].Subject.CommonName
				if cs.Version < tls.VersionTLS12 {
					t.Errorf("TLS version %x", cs.Version)
				}
				return nil
			}}}}
		resp, err := c.Get(url)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return seen, nil
	}
	if cn, err := get(first); err != nil || cn != "first" {
		t.Fatalf("first certificate: %q %v", cn, err)
	}
	// Plain HTTP is not served on the TLS port.
	if resp, err := http.Get("http://" + raw.Addr().String() + "/"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served on the TLS listener")
		}
	}
	// A TLS 1.1 client is refused.
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get(url); err == nil {
		resp.Body.Close()
		t.Fatal("a TLS 1.1 client was served")
	}

	second := writeCert(t, certFile, keyFile, "second")
	deadline := time.Now().Add(10 * time.Second)
	for {
		cn, err := get(second)
		if err == nil && cn == "second" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate was never served: %q %v", cn, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestWrapRefusesAMissingCertificate(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_, err = Listen{Addr: "127.0.0.1:0", CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem"}.Wrap(raw, nil)
	if err == nil || !strings.Contains(err.Error(), "cert.pem") {
		t.Fatalf("Wrap: %v", err)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 with common
// name cn, and its key, and returns the certificate.
func writeCert(t *testing.T, certFile, keyFile, cn string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Key first, then certificate: a handshake between the two writes
	// finds a pair that does not load and keeps the previous one.
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestBehindProxyClientAddress: the client address is the one the proxy
// appended to X-Forwarded-For; what the client wrote before it is ignored,
// and without a usable one the connection's address stays.
func TestBehindProxyClientAddress(t *testing.T) {
	var got string
	h := Listen{Addr: "0.0.0.0:8080", Tokens: true, BehindProxy: true}.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.RemoteAddr
	}))
	for _, c := range []struct {
		xff  []string
		want string
	}{
		{nil, "192.0.2.1:1234"},
		{[]string{"203.0.113.7"}, "203.0.113.7:0"},
		{[]string{"127.0.0.1, 203.0.113.7"}, "203.0.113.7:0"},
		{[]string{"127.0.0.1", "2001:db8::7"}, "[2001:db8::7]:0"},
		{[]string{"203.0.113.7, not-an-address"}, "192.0.2.1:1234"},
	} {
		r := httptest.NewRequest("GET", "/v1/agents", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		r.Header.Set("X-Forwarded-Proto", "https")
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != c.want {
			t.Errorf("X-Forwarded-For %q: client %s, want %s", c.xff, got, c.want)
		}
	}
}
