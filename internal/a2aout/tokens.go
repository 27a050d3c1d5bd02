package a2aout

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/netguard"
)

// TokenExpiryMargin is how long before its expiry a cached OAuth 2.0 token
// is fetched again.
const TokenExpiryMargin = 30 * time.Second

// discoveryTTL is how long an OpenID Connect discovery document is kept.
const discoveryTTL = time.Hour

// tokenKey identifies one cached token: the agent, the scheme, the token
// endpoint and a digest of the client credentials (a new PUT changes it,
// so rotated credentials never reuse an old token).
type tokenKey struct {
	agent, scheme, tokenURL string
	client                  [32]byte
}

func newTokenKey(agent, scheme, tokenURL string, s credentials.Secret) tokenKey {
	return tokenKey{agent: agent, scheme: scheme, tokenURL: tokenURL,
		client: sha256.Sum256([]byte(s.ClientID + "\x00" + s.ClientSecret + "\x00" + strings.Join(s.Scopes, " ")))}
}

// tokenCache fetches OAuth 2.0 client-credentials tokens
// (golang.org/x/oauth2/clientcredentials) and OpenID Connect discovery
// documents through the outbound guard's client, and keeps them.
type tokenCache struct {
	http *http.Client

	mu     sync.Mutex
	tokens map[tokenKey]oauth2.TokenSource
	oidc   map[string]discovered
}

type discovered struct {
	tokenURL string
	at       time.Time
}

func newTokenCache(client *http.Client) *tokenCache {
	return &tokenCache{http: client, tokens: map[tokenKey]oauth2.TokenSource{}, oidc: map[string]discovered{}}
}

// token returns a valid access token for key, from the cache until
// TokenExpiryMargin before its expiry. Errors name the endpoint's status,
// never a secret or the endpoint's body.
func (c *tokenCache) token(ctx context.Context, key tokenKey, tokenURL string, s credentials.Secret) (string, error) {
	c.mu.Lock()
	src, ok := c.tokens[key]
	if !ok {
		cfg := &clientcredentials.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, TokenURL: tokenURL, Scopes: s.Scopes}
		// The source keeps this context for every later fetch: it carries
		// only the guarded client, not the caller's deadline.
		bg := context.WithValue(context.Background(), oauth2.HTTPClient, c.http)
		src = oauth2.ReuseTokenSourceWithExpiry(nil, cfg.TokenSource(bg), TokenExpiryMargin)
		if len(c.tokens) > 10000 {
			clear(c.tokens)
		}
		c.tokens[key] = src
	}
	c.mu.Unlock()
	type result struct {
		tok *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	go func() {
		t, err := src.Token()
		done <- result{t, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if r.err != nil {
		c.drop(key)
		var re *oauth2.RetrieveError
		if errors.As(r.err, &re) && re.Response != nil {
			return "", &EndpointError{What: "token endpoint", StatusCode: re.Response.StatusCode}
		}
		return "", fmt.Errorf("token endpoint: %w", reasonClass(r.err))
	}
	if r.tok.AccessToken == "" {
		c.drop(key)
		return "", errors.New("token endpoint answered no access_token")
	}
	return r.tok.AccessToken, nil
}

// drop forgets the cached token of key.
func (c *tokenCache) drop(key tokenKey) {
	c.mu.Lock()
	delete(c.tokens, key)
	c.mu.Unlock()
}

// discover returns the token endpoint of an OpenID Connect provider from
// its discovery document (kept for discoveryTTL).
func (c *tokenCache) discover(ctx context.Context, discoveryURL string) (string, error) {
	c.mu.Lock()
	d, ok := c.oidc[discoveryURL]
	c.mu.Unlock()
	if ok && time.Since(d.at) < discoveryTTL {
		return d.tokenURL, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, discoveryURL, nil)
	if err != nil {
		return "", fmt.Errorf("OpenID Connect discovery URL is not usable")
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("OpenID Connect discovery: %w", reasonClass(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", &EndpointError{What: "OpenID Connect discovery", StatusCode: res.StatusCode}
	}
	var doc struct {
		TokenEndpoint string `json:"token_endpoint"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&doc); err != nil {
		return "", fmt.Errorf("OpenID Connect discovery document is not JSON")
	}
	u, err := url.Parse(doc.TokenEndpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("OpenID Connect discovery document has no usable token_endpoint")
	}
	// The client secret was stored for the discovery URL's origin: a
	// document naming a token endpoint elsewhere (another host, or http
	// for an https discovery) does not get it. A provider whose token
	// endpoint is on another host is declared as an oauth2 scheme with
	// that tokenUrl instead.
	if du, err := url.Parse(discoveryURL); err != nil || Origin(u) != Origin(du) {
		return "", fmt.Errorf("%w: the OpenID Connect discovery document names a token_endpoint on another origin than the discovery URL's (%s); declare the scheme as oauth2 with its tokenUrl", ErrCrossOriginRedirect, Origin(u))
	}
	c.mu.Lock()
	if len(c.oidc) > 1000 {
		clear(c.oidc)
	}
	c.oidc[discoveryURL] = discovered{tokenURL: doc.TokenEndpoint, at: time.Now()}
	c.mu.Unlock()
	return doc.TokenEndpoint, nil
}

// reasonClass reduces a failed token or discovery request to the class of
// its failure (classOf), keeping the sentinel errors callers test for.
func reasonClass(err error) error {
	switch {
	case errors.Is(err, netguard.ErrRefused), errors.Is(err, netguard.ErrTooManyRedirects), errors.Is(err, ErrCrossOriginRedirect):
		return redactURLError(err)
	case errors.Is(err, context.DeadlineExceeded):
		return redactURLError(err)
	}
	return errors.New(classOf(err))
}

// redactURLError keeps a transport error's cause but not the request it
// was about (the oauth2 package's errors may quote the request).
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, redactedURL(ue.URL), ue.Err)
	}
	return err
}

func redactedURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(URL)"
	}
	u.RawQuery, u.User, u.Fragment = "", nil, ""
	return u.String()
}

// EndpointError reports that a token endpoint or an OpenID Connect
// discovery URL answered an HTTP status other than 200.
type EndpointError struct {
	What       string
	StatusCode int
}

// Error names the endpoint and the status, never its body.
func (e *EndpointError) Error() string {
	return fmt.Sprintf("%s answered HTTP %d %s", e.What, e.StatusCode, http.StatusText(e.StatusCode))
}
