// Command otlpingest measures OTLP trace ingest on the embedded default,
// end to end through POST /v1/traces, with traces as instrumented agents
// export them: per plan, a root invoke_agent span (marked aigp.plan_root,
// so it completes the plan), a model call and five tool calls, their
// attributes written as the OpenTelemetry GenAI conventions write them (odd
// plans) or as OpenInference does (even plans). Exports hold -batch spans
// (the BatchSpanProcessor's default 512; whole traces, 511 spans), so an
// export carries the traces of 73 plans, each plan's events appended in one commit.
//
// For each -conns value it starts a fresh server, declares -plans
// ANTICIPATEs (not timed), sends every export with that many requests at
// once, and prints spans/s, CPU per span (process user+system: the server
// and the client's HTTP; bodies are encoded before the clock starts), the
// export latency percentiles (a 429 is waited out and sent again, as an
// exporter does, within one export's latency; the count is printed), and how long after the last export every
// plan's VERIFY was done (the change feed drained), with the CPU per span
// that includes it. Then it exports one plan of -long-plan events and
// prints how long after its last export its VERIFY was stored.
//
//	go run ./bench/otlpingest                 # 1, 8 and 32 connections
//	go run ./bench/otlpingest -conns 8 -cpuprofile cpu.out
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
)

func main() {
	plans := flag.Int("plans", 3000, "plans (one ANTICIPATE and one trace of 7 spans each)")
	batch := flag.Int("batch", 512, "spans per export request")
	conns := flag.String("conns", "1,8,32", "export requests at once, one run per value")
	seed := flag.String("seed", "internal/anticipate/testdata/seed_anticipate.json", "the ANTICIPATE declared, renamed per plan")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the timed part of the last run to this file")
	long := flag.Int("long-plan", 10000, "then one plan of this many events (tool spans, two events each), exported in requests of -batch spans, its root last: prints how long after its last export its VERIFY was stored (0: skip)")
	flag.Parse()
	raw, err := os.ReadFile(*seed)
	if err != nil {
		fail(err)
	}
	fmt.Printf("OTLP ingest, embedded default (fsync per commit): %d plans x 7 spans (a model call, 5 tool calls, the root), %d spans per export, protobuf\n", *plans, *batch)
	fmt.Printf("%6s %10s %12s %9s %9s %9s %14s %16s %5s\n", "conns", "spans/s", "CPU/span", "p50", "p99", "max", "verified after", "CPU/span+VERIFY", "429s")
	for _, f := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fail(fmt.Errorf("-conns: %q is not a positive number", f))
		}
		r, err := run(*plans, *batch, n, raw, *profile)
		if err != nil {
			fail(err)
		}
		fmt.Printf("%6d %10.0f %10.1fµs %9s %9s %9s %14s %14.1fµs %5d\n", n, r.spansPerSec, r.cpuPerSpan, r.p50, r.p99, r.max, r.verified, r.cpuPerSpanVerified, r.throttled)
	}
	if *long > 0 {
		if err := longPlan(*long, *batch, raw); err != nil {
			fail(err)
		}
	}
}

// longPlan exports one plan of events tool-call events and prints how
// long after its last export (the one with its root) its VERIFY was
// stored.
func longPlan(events, batch int, seed []byte) error {
	dir, err := os.MkdirTemp("", "otlpingest-long-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	token := auth.Generate()
	authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "bench", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	a, err := app.Start(app.Config{DataDir: dir, Auth: authn, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	post := func(path, ct string, body []byte) ([]byte, error) {
		req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 || len(out) > 0 && ct == "application/x-protobuf" {
			return nil, fmt.Errorf("%s: %d %q", path, resp.StatusCode, out)
		}
		return out, nil
	}
	agent, err := declare(1, seed, post)
	if err != nil {
		return err
	}
	full := trace(0, uint64(time.Now().Add(-time.Hour).UnixNano()), agent)
	root, tool := full[len(full)-1], full[1]
	var spans []*tracev1.Span
	for i := range events / 2 {
		sp := proto.Clone(tool).(*tracev1.Span)
		sp.SpanId = binary.BigEndian.AppendUint64(nil, uint64(1000+i))
		sp.StartTimeUnixNano += uint64(i) * uint64(time.Millisecond)
		sp.EndTimeUnixNano += uint64(i) * uint64(time.Millisecond)
		spans = append(spans, sp)
	}
	spans = append(spans, root)
	start := time.Now()
	for len(spans) > 0 {
		n := min(batch, len(spans))
		b, _ := proto.Marshal(&tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{
			Resource:   &resourcev1.Resource{Attributes: []*commonv1.KeyValue{str("gen_ai.agent.id", agent)}},
			ScopeSpans: []*tracev1.ScopeSpans{{Spans: spans[:n]}}}}})
		if _, err := post("/v1/traces", "application/x-protobuf", b); err != nil {
			return err
		}
		spans = spans[n:]
	}
	exported := time.Now()
	if err := drained(a, 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("one plan of %d events: exported in %v; its VERIFY stored %v after the last export\n", events+1, exported.Sub(start).Round(time.Millisecond), time.Since(exported).Round(time.Millisecond))
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "otlpingest:", err)
	os.Exit(1)
}

type result struct {
	spansPerSec, cpuPerSpan, cpuPerSpanVerified float64
	p50, p99, max, verified                     time.Duration
	throttled                                   int64
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(plans, batch, conns int, seed []byte, profile string) (result, error) {
	dir, err := os.MkdirTemp("", "otlpingest-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	token := auth.Generate()
	authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "bench", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	a, err := app.Start(app.Config{DataDir: dir, Auth: authn, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return result{}, err
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var throttled atomic.Int64
	post := func(path, ct string, body []byte) ([]byte, error) {
		for {
			req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", ct)
			resp, err := client.Do(req)
			if err != nil {
				return nil, err
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				// As an OTLP exporter does: wait as told, send again.
				throttled.Add(1)
				wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				time.Sleep(time.Duration(max(wait, 1)) * time.Second)
				continue
			}
			if resp.StatusCode/100 != 2 {
				return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, out)
			}
			return out, nil
		}
	}
	agent, err := declare(plans, seed, post)
	if err != nil {
		return result{}, err
	}
	bodies := exports(plans, batch, agent)
	if err := drained(a, time.Minute); err != nil {
		return result{}, err
	}

	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		_ = pprof.StartCPUProfile(f)
	}
	work := make(chan []byte)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var lat []time.Duration
	start, c0 := time.Now(), cpu()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				t := time.Now()
				out, err := post("/v1/traces", "application/x-protobuf", b)
				d := time.Since(t)
				if err == nil && len(out) > 0 {
					err = fmt.Errorf("partial success: %x", out)
				}
				mu.Lock()
				lat = append(lat, d)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, b := range bodies {
		work <- b
	}
	close(work)
	wg.Wait()
	wall, used := time.Since(start), cpu()-c0
	if firstErr != nil {
		return result{}, firstErr
	}
	if err := drained(a, 5*time.Minute); err != nil {
		return result{}, err
	}
	verified, usedAll := time.Since(start)-wall, cpu()-c0
	if profile != "" {
		pprof.StopCPUProfile()
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration {
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Round(100 * time.Microsecond)
	}
	n := float64(plans * spansPerTrace)
	return result{
		spansPerSec: n / wall.Seconds(), cpuPerSpan: float64(used.Microseconds()) / n, cpuPerSpanVerified: float64(usedAll.Microseconds()) / n,
		throttled: throttled.Load(), p50: pct(0.5), p99: pct(0.99), max: lat[len(lat)-1].Round(100 * time.Microsecond), verified: verified.Round(time.Millisecond),
	}, nil
}

// drained waits until the change feed has nothing left to process: every
// VERIFY of a completed plan is then stored.
func drained(a *app.App, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		left, err := a.Store.ReadFeed(context.Background(), 1)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("the change feed was not drained in time")
}

// declare signs and declares one ANTICIPATE per plan (plan-<n>), 8 at
// once, and returns their agent.
func declare(plans int, seed []byte, post func(path, ct string, body []byte) ([]byte, error)) (string, error) {
	var agent string
	bodies := make(chan []byte)
	errc := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range bodies {
				if _, err := post("/v1/anticipations", "application/json", b); err != nil {
					select {
					case errc <- err:
					default:
					}
				}
			}
		}()
	}
	for p := range plans {
		var m map[string]any
		if err := json.Unmarshal(seed, &m); err != nil {
			return "", err
		}
		m["anticipation_id"], m["plan_id"] = fmt.Sprintf("ant-%d", p), fmt.Sprintf("plan-%d", p)
		m["scope_envelope_id"], m["session_id"] = fmt.Sprintf("scope-%d", p), fmt.Sprintf("conv-%d", p)
		agent = m["agent_id"].(string)
		b, _ := json.Marshal(m)
		signed, err := anticipate.Sign(b)
		if err != nil {
			return "", err
		}
		bodies <- signed
	}
	close(bodies)
	wg.Wait()
	select {
	case err := <-errc:
		return "", err
	default:
	}
	return agent, nil
}

// spansPerTrace is the root, a model call and five tool calls.
const spansPerTrace = 7

// exports encodes the traces of every plan into export requests of batch
// spans, in the order a BatchSpanProcessor sends them (a trace's children
// end, and are exported, before its root).
func exports(plans, batch int, agent string) [][]byte {
	t0 := uint64(time.Now().Add(-time.Hour).UnixNano())
	// Whole traces per export: requests sent at once stand for several
	// processes, and one process's processor exports a trace's spans in
	// order.
	perExport := max(1, batch/spansPerTrace)
	var out [][]byte
	for first := 0; first < plans; first += perExport {
		var spans []*tracev1.Span
		for p := first; p < min(plans, first+perExport); p++ {
			spans = append(spans, trace(p, t0+uint64(p)*uint64(time.Second), agent)...)
		}
		n := len(spans)
		b, _ := proto.Marshal(&tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{
			Resource: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{
				str("service.name", "travel-agent"), str("service.version", "1.4.2"), str("telemetry.sdk.language", "python"),
				str("telemetry.sdk.name", "opentelemetry"), str("telemetry.sdk.version", "1.38.0"), str("gen_ai.agent.id", agent)}},
			ScopeSpans: []*tracev1.ScopeSpans{{Scope: &commonv1.InstrumentationScope{Name: "opentelemetry.instrumentation.openai_agents", Version: "0.4.0"}, Spans: spans[:n]}}}}})
		out = append(out, b)
	}
	return out
}

// trace is plan p's spans, children first.
func trace(p int, start uint64, agent string) []*tracev1.Span {
	tid := make([]byte, 16)
	binary.BigEndian.PutUint64(tid, 0x5eed)
	binary.BigEndian.PutUint64(tid[8:], uint64(p+1))
	sid := func(i int) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, uint64(p)<<8|uint64(i+1))
		return b
	}
	plan := fmt.Sprintf("plan-%d", p)
	ms := uint64(time.Millisecond)
	root := &tracev1.Span{TraceId: tid, SpanId: sid(0), Name: "invoke_agent travel-agent", Kind: tracev1.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: start, EndTimeUnixNano: start + 4000*ms,
		Attributes: []*commonv1.KeyValue{str("gen_ai.operation.name", "invoke_agent"), str("gen_ai.agent.name", "travel-agent"),
			str("gen_ai.agent.id", agent), str("gen_ai.conversation.id", fmt.Sprintf("conv-%d", p)), str("aigp.plan_id", plan),
			boolean("aigp.plan_root", true), str("gen_ai.provider.name", "openai")}}
	model := &tracev1.Span{TraceId: tid, SpanId: sid(1), ParentSpanId: sid(0), Name: "chat gpt-4o", Kind: tracev1.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: start + 10*ms, EndTimeUnixNano: start + 900*ms,
		Attributes: []*commonv1.KeyValue{str("gen_ai.operation.name", "chat"), str("gen_ai.provider.name", "openai"),
			str("gen_ai.request.model", "gpt-4o"), str("gen_ai.response.model", "gpt-4o-2024-08-06"), str("gen_ai.response.id", fmt.Sprintf("chatcmpl-%d", p)),
			integer("gen_ai.usage.input_tokens", 1432), integer("gen_ai.usage.output_tokens", 212), double("gen_ai.request.temperature", 0.2),
			strings_("gen_ai.response.finish_reasons", "tool_calls"), str("aigp.plan_id", plan),
			str("gen_ai.input.messages", `[{"role":"system","parts":[{"type":"text","content":"You are a travel agent. Book what the user asks within policy."}]},{"role":"user","parts":[{"type":"text","content":"Book me a flight to Riga next Friday, back Sunday, and a hotel near the old town."}]}]`),
			str("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"tool_call","id":"call_1","name":"search_flights","arguments":{"to":"RIX","date":"2026-12-11"}}],"finish_reason":"tool_calls"}]`)}}
	out := []*tracev1.Span{model}
	tools := []string{"search_flights", "book_flight", "search_hotels", "book_hotel", "send_itinerary"}
	for i, tool := range tools {
		s, e := start+uint64(1000+500*i)*ms, start+uint64(1400+500*i)*ms
		args := fmt.Sprintf(`{"query":"%s","trip":"trip-%d","passengers":1}`, tool, p)
		result := fmt.Sprintf(`{"ok":true,"reference":"%s-%d-%d"}`, tool, p, i)
		var attrs []*commonv1.KeyValue
		if p%2 == 1 {
			attrs = []*commonv1.KeyValue{str("gen_ai.operation.name", "execute_tool"), str("gen_ai.tool.name", tool), str("gen_ai.tool.type", "function"),
				str("gen_ai.tool.call.id", fmt.Sprintf("call_%d", i+1)), str("gen_ai.tool.call.arguments", args), str("gen_ai.tool.call.result", result)}
		} else {
			attrs = []*commonv1.KeyValue{str("openinference.span.kind", "TOOL"), str("tool.name", tool), str("tool.description", "Travel API: "+tool),
				str("tool.parameters", args), str("input.value", args), str("input.mime_type", "application/json"),
				str("output.value", result), str("output.mime_type", "application/json")}
		}
		attrs = append(attrs, str("aigp.plan_id", plan))
		out = append(out, &tracev1.Span{TraceId: tid, SpanId: sid(2 + i), ParentSpanId: sid(0), Name: "execute_tool " + tool, Kind: tracev1.Span_SPAN_KIND_INTERNAL,
			StartTimeUnixNano: s, EndTimeUnixNano: e, Attributes: attrs, Status: &tracev1.Status{Code: tracev1.Status_STATUS_CODE_OK}})
	}
	return append(out, root)
}

func str(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

func integer(k string, v int64) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: v}}}
}

func double(k string, v float64) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_DoubleValue{DoubleValue: v}}}
}

func boolean(k string, v bool) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: v}}}
}

func strings_(k string, vs ...string) *commonv1.KeyValue {
	var arr []*commonv1.AnyValue
	for _, v := range vs {
		arr = append(arr, &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}})
	}
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{Values: arr}}}}
}
