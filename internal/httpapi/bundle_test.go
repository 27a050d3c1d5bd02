package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/evidence"
	"github.com/agentclock/clockwork/internal/httpapi"
)

// TestEvidenceBundle gets a VERIFY's bundle streamed (as the local server
// serves it) and bounded (as the API Lambda serves it, gzip-compressed when
// the client accepts it), checks both with the offline verifier, and
// checks the bound's 413.
func TestEvidenceBundle(t *testing.T) {
	ap := startApp(t)
	f := seed(t, ap.Handler)
	path := "/v1/verifications/" + f.verificationID + "/bundle"

	streamed := do(ap.Handler, "GET", path, scopeToken("read"), nil)
	if streamed.status != 200 || streamed.header.Get("Content-Type") != "application/json" {
		t.Fatalf("streamed: %d %s", streamed.status, streamed.body)
	}
	if rep := evidence.Check(streamed.body, evidence.Options{}); !rep.OK() || rep.Events != len(planEvents) {
		t.Fatalf("the verifier refuses the server's bundle: %+v", rep.Findings)
	}

	bounded := httpapi.New(ap.Watcher, ap.Eval, ap.Handler.Auth, quietLog())
	bounded.MaxBundleBytes = httpapi.LambdaBundleBytes
	plain := do(bounded, "GET", path, allToken, nil)
	if plain.status != 200 || !bytes.Equal(plain.body, streamed.body) || plain.header.Get("Content-Encoding") != "" {
		t.Fatalf("bounded, plain: %d %q", plain.status, plain.header)
	}
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+allToken)
	req.Header.Set("Accept-Encoding", "br;q=1.0, gzip;q=0.8")
	rec := httptest.NewRecorder()
	bounded.ServeHTTP(rec, req)
	if rec.Code != 200 || rec.Header().Get("Content-Encoding") != "gzip" || rec.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("bounded, gzip: %d %q", rec.Code, rec.Header())
	}
	zr, err := gzip.NewReader(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	if !bytes.Equal(unzipped, streamed.body) {
		t.Fatal("the gzip-compressed bundle differs from the streamed one")
	}

	// The bound is on the body as the Lambda adapter carries it, escaped
	// as a JSON string: a bundle that fits as written but not escaped (its
	// quotes double) is refused, not answered with more than a Lambda
	// response can hold (a 502 from API Gateway).
	bounded.MaxBundleBytes = int64(len(streamed.body) + 10)
	if escaped := do(bounded, "GET", path, allToken, nil); escaped.status != 413 {
		t.Fatalf("a bundle of %d bytes, more once escaped, under a bound of %d: %d", len(streamed.body), bounded.MaxBundleBytes, escaped.status)
	}
	carried, _ := json.Marshal(string(streamed.body))
	bounded.MaxBundleBytes = int64(len(carried))
	if fits := do(bounded, "GET", path, allToken, nil); fits.status != 200 {
		t.Fatalf("a bundle whose escaped form is exactly the bound: %d", fits.status)
	}

	bounded.MaxBundleBytes = 200
	tooLarge := do(bounded, "GET", path, allToken, nil)
	if tooLarge.status != 413 || tooLarge.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(tooLarge.body), "200 bytes") {
		t.Fatalf("over the bound: %d %s", tooLarge.status, tooLarge.body)
	}

	if a := do(ap.Handler, "GET", "/v1/verifications/vrf-nope/bundle", allToken, nil); a.status != 404 {
		t.Fatalf("unknown verification: %d %s", a.status, a.body)
	}
	if a := do(ap.Handler, "GET", path, otherToken, nil); a.status != 404 {
		t.Fatalf("another agent's token must get the answer of an unknown id: %d %s", a.status, a.body)
	}
}
