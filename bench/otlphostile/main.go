// Command otlphostile measures what hostile OTLP exports cost the embedded
// server's memory: -n requests at once, each a gzip-compressed body of one
// span with -attributes empty attributes (3,000,000: 9 KB compressed), in
// protobuf and in OTLP JSON. It prints each request's status and the
// process's peak heap and peak RSS above what it held before.
//
//	go run ./bench/otlphostile
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
)

func main() {
	n := flag.Int("n", 4, "requests at once")
	attrs := flag.Int("attributes", 3_000_000, "empty attributes on the one span")
	flag.Parse()
	dir, err := os.MkdirTemp("", "otlphostile-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	token := auth.Generate()
	authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "bench", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	a, err := app.Start(app.Config{DataDir: dir, Auth: authn, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		fail(err)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	for _, enc := range []string{"application/x-protobuf", "application/json"} {
		body := hostile(*attrs, enc == "application/json")
		runtime.GC()
		heap0, rss0 := heapInuse(), rss()
		var peakHeap atomic.Uint64
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if h := heapInuse(); h > peakHeap.Load() {
					peakHeap.Store(h)
				}
				time.Sleep(time.Millisecond)
			}
		}()
		var wg sync.WaitGroup
		statuses := make([]string, *n)
		for i := range *n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", srv.URL+"/v1/traces", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", enc)
				req.Header.Set("Content-Encoding", "gzip")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					statuses[i] = err.Error()
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				statuses[i] = fmt.Sprintf("%d %.70q", resp.StatusCode, out)
			}()
		}
		wg.Wait()
		close(stop)
		fmt.Printf("%s: %d requests at once of %d bytes (gzip) each, one span of %d empty attributes\n", enc, *n, len(body), *attrs)
		for _, s := range statuses {
			fmt.Printf("  %s\n", s)
		}
		fmt.Printf("  peak heap in use +%d MB, peak RSS +%d MB (over %d MB before)\n", (peakHeap.Load()-min(heap0, peakHeap.Load()))>>20, (max(rss(), rss0)-rss0)>>20, rss0>>20)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "otlphostile:", err)
	os.Exit(1)
}

// hostile is a gzip-compressed export of one span with n empty attributes.
func hostile(n int, isJSON bool) []byte {
	var raw bytes.Buffer
	if isJSON {
		raw.WriteString(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000001","name":"x","attributes":[`)
		raw.WriteString(strings.TrimSuffix(strings.Repeat("{},", n), ","))
		raw.WriteString(`]}]}]}]}`)
	} else {
		// TracesData{1: ResourceSpans{2: ScopeSpans{2: Span{9: KeyValue{} x n}}}}
		span := bytes.Repeat([]byte{0x4a, 0x00}, n)
		ss := append(append([]byte{0x12}, uvarint(len(span))...), span...)
		rs := append(append([]byte{0x12}, uvarint(len(ss))...), ss...)
		raw.Write(append(append([]byte{0x0a}, uvarint(len(rs))...), rs...))
	}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = w.Write(raw.Bytes())
	_ = w.Close()
	return z.Bytes()
}

func uvarint(v int) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// rss is the process's peak resident set (VmHWM), in bytes.
func rss() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
