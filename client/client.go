package client

import "net/http"

// New returns a client of the Kassa server at server (its base URL, such as "http://127.0.0.1:8080";
// a path prefix is kept) that authenticates every request with auth and retries as DefaultRetry says,
// over http.DefaultTransport. opts come after that: WithRequestEditorFn adds to each request, and a
// WithHTTPClient whose transport is built by Transport keeps authentication and retries.
func New(server string, auth Auth, opts ...ClientOption) (*ClientWithResponses, error) {
	hc := &http.Client{Transport: Transport(server, auth, DefaultRetry, nil)}
	return NewClientWithResponses(server, append([]ClientOption{WithHTTPClient(hc)}, opts...)...)
}

// Transport returns the transport of New with another retry policy and base transport (nil:
// http.DefaultTransport): it retries each call as retry says, every attempt authenticated by auth.
func Transport(server string, auth Auth, retry Retry, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &retrier{policy: retry, next: auth(server, next)}
}
