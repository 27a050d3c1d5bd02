package httpapi

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/evidence"
)

// LambdaBundleBytes is the bound on an evidence bundle's response where the
// whole response must fit in one AWS Lambda response (6 MB for a
// synchronous invocation; API Gateway's own limit, 10 MB, is looser): the
// body as the Lambda proxy response carries it, escaped as a JSON string
// (a control character takes 6 bytes there, a quote 2) or, gzip-compressed
// when the client accepts it, base64-encoded, with room left for the
// headers and the envelope.
const LambdaBundleBytes = 5_800_000

// carriedLen is how many bytes body takes in a Lambda proxy response:
// base64 for a compressed (binary) body, else escaped as a JSON string the
// way aws-lambda-go's encoder escapes it (encoding/json with HTML escaping
// off, its default: '<', '>' and '&' stay one byte).
func carriedLen(body []byte, binary bool) int {
	if binary {
		return base64.StdEncoding.EncodedLen(len(body))
	}
	n := 2
	for i := 0; i < len(body); {
		b := body[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(body[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// bundle answers GET /v1/verifications/{verificationId}/bundle: the
// evidence bundle (package evidence) of one VERIFY. Events are read from
// the store one page at a time and written as they are read. With
// MaxBundleBytes 0 the bundle is streamed, in constant memory, whatever its
// size; otherwise it is built in memory up to that bound (as a Lambda
// response must be anyway) and refused with 413 past it.
func (h *Handler) bundle(w http.ResponseWriter, r *http.Request) error {
	parts, err := h.Eval.Bundle(r.Context(), r.PathValue("verificationId"), actsFor(r))
	if err != nil {
		return err
	}
	var key *evidence.PublicKey
	if pub := h.Eval.PublicKey(); pub != nil {
		key = &evidence.PublicKey{Alg: evidence.KeyAlg, PublicKey: base64.RawURLEncoding.EncodeToString(pub)}
	}
	if h.MaxBundleBytes > 0 {
		return h.boundedBundle(w, r, parts, key)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	err = writeBundle(r, w, parts, key, h.Eval, func() { _ = rc.Flush() })
	if err != nil {
		// The status is sent: abort the response so the client sees a
		// broken transfer, never a truncated document.
		h.Log.Error("evidence bundle", "verification", r.PathValue("verificationId"), "err", err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

func writeBundle(r *http.Request, w io.Writer, parts *evaluation.BundleParts, key *evidence.PublicKey, eval *evaluation.Service, flushed func()) error {
	bw, err := evidence.NewWriter(w, parts.Anticipation, parts.Verification, key)
	if err != nil {
		return err
	}
	err = eval.EachEvent(r.Context(), parts.Execution, func(ev evaluation.StoredEvent) error {
		return bw.Event(evidence.Event{Seq: ev.Seq, Prev: ev.Prev, Digest: ev.Digest, Event: ev.Event})
	}, func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		if flushed != nil {
			flushed()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return bw.Close()
}

var errBundleTooLarge = errors.New("evidence bundle over the bound")

// cappedBuffer is a bytes.Buffer that refuses to grow past max bytes.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errBundleTooLarge
	}
	return b.Buffer.Write(p)
}

func (h *Handler) boundedBundle(w http.ResponseWriter, r *http.Request, parts *evaluation.BundleParts, key *evidence.PublicKey) error {
	buf := &cappedBuffer{max: int(h.MaxBundleBytes)}
	var out io.Writer = buf
	gz := acceptsGzip(r)
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(buf)
		out = zw
	}
	err := writeBundle(r, out, parts, key, h.Eval, nil)
	if err == nil && zw != nil {
		err = zw.Close()
	}
	// The buffer's cap is on the body as written; the bound is on the body
	// as carried, which escaping or base64 makes larger.
	if err == nil && carriedLen(buf.Bytes(), gz) > int(h.MaxBundleBytes) {
		err = errBundleTooLarge
	}
	if errors.Is(err, errBundleTooLarge) {
		how := "fetch it with Accept-Encoding: gzip, which usually makes it several times smaller, or"
		if gz {
			how = "even gzip-compressed;"
		}
		return errs.E(errs.TooLarge, "the evidence bundle of verification %s (%d events) is larger than the %d bytes one response can carry on this deployment (as carried: escaped, or base64 when compressed), %s read its parts with GET /v1/verifications/%s, GET /v1/anticipations/%s and GET /v1/executions/%s/events",
			r.PathValue("verificationId"), parts.Events, h.MaxBundleBytes, how, r.PathValue("verificationId"), parts.AnticipationID, parts.PlanID)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", "Accept-Encoding")
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}
