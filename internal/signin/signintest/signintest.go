// Package signintest walks the authorization pages for tests, as a browser without JavaScript would:
// it signs a merchant in, approves the partner's request, and returns the code the partner's
// callback would receive.
package signintest

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// Approve opens authURL (a full /oauth/authorize URL on the Kassa at base), signs in with email and
// password, approves, and returns the code of the redirect to the callback.
func Approve(t testing.TB, base, authURL, email, password string) string {
	t.Helper()
	c := Client()
	request := Field(t, Get(t, c, authURL), "request")
	resp, err := c.PostForm(base+"/oauth/authorize/sign-in", url.Values{"request": {request}, "email": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in as %s: %d", email, resp.StatusCode)
	}
	csrf := Field(t, Get(t, c, authURL), "csrf_token")
	resp, err = c.PostForm(base+"/oauth/authorize/decision", url.Values{"request": {request}, "csrf_token": {csrf}, "decision": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("approve: %d %v", resp.StatusCode, resp.Header)
	}
	return loc.Query().Get("code")
}

// Client is an HTTP client with a cookie jar that does not follow redirects.
func Client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Get fetches u and returns the body.
func Get(t testing.TB, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Field reads the value of a hidden form field of a page.
func Field(t testing.TB, body, name string) string {
	t.Helper()
	m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no field %s in %s", name, body)
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}
