package apidocs_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/kassapay/kassa/api"
	"github.com/kassapay/kassa/internal/apidocs"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// described is api/openapi.yaml as the tests read it, independently of the library the page is built
// with: gopkg.in/yaml.v3, which expands the document's anchors and merge keys.
type described struct {
	Tags       []struct{ Name string }
	Paths      map[string]map[string]any
	Webhooks   map[string]map[string]any
	Components struct {
		Schemas map[string]any
	}
}

// methods are the operations' keys of a path item.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// describedOp is one operation of the document.
type describedOp struct {
	method, path, id string
	statuses         []string
}

func readDocument(t *testing.T) (described, []describedOp) {
	t.Helper()
	var d described
	if err := yaml.Unmarshal(api.OpenAPI, &d); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	var ops []describedOp
	for _, items := range []map[string]map[string]any{d.Paths, d.Webhooks} {
		for path, item := range items {
			for _, m := range methods {
				op, ok := item[m].(map[string]any)
				if !ok {
					continue
				}
				o := describedOp{method: strings.ToUpper(m), path: path}
				if o.id, _ = op["operationId"].(string); o.id == "" {
					// The anchor of an operation is its operationId; one without would be at an anchor no
					// one can guess (and the generated client could not name its method).
					t.Errorf("%s %s has no operationId", o.method, path)
				}
				responses, _ := op["responses"].(map[string]any)
				for status := range responses {
					o.statuses = append(o.statuses, status)
				}
				if len(o.statuses) == 0 {
					t.Errorf("%s %s documents no response", o.method, path)
				}
				ops = append(ops, o)
			}
		}
	}
	if len(ops) < 100 || len(d.Components.Schemas) < 40 {
		t.Fatalf("read %d operations and %d schemas from api/openapi.yaml: the test does not read the document", len(ops), len(d.Components.Schemas))
	}
	return d, ops
}

// get fetches path from srv with the request headers hdr (name, value, …), and answers the response
// with its body as sent.
func get(t *testing.T, srv *servertest.Server, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// An Accept-Encoding of the request's own keeps the transport from decompressing the body.
	req.Header.Set("Accept-Encoding", "identity")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

var (
	idAttr   = regexp.MustCompile(`\sid="([^"]*)"`)
	hrefAttr = regexp.MustCompile(`\shref="#([^"]*)"`)
	// opSection is the start of an operation's section on the page, its anchor the submatch.
	opSection = regexp.MustCompile(`<section class="card op" id="([^"]*)">`)
)

// The page at GET /docs/api, served by Kassa without a credential, shows every operation of
// api/openapi.yaml (its paths and its webhooks) at the anchor of its operationId, under its method and
// path, with every status it documents at its own anchor; every component schema at its anchor; a
// table of contents entry for every tag. Every anchor is unique and every link within the page leads
// to one.
func TestReferenceShowsTheWholeDocument(t *testing.T) {
	t.Parallel()
	d, ops := readDocument(t)
	srv := servertest.Start(t, storetest.SQLite(t), server.Config{})
	resp, body := get(t, srv, "/docs/api")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs/api: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	page := string(body)
	_, toc, _ := strings.Cut(page, `<nav class="toc" aria-label="Contents">`)
	toc, _, _ = strings.Cut(toc, "</nav>")

	ids := map[string]int{}
	for _, m := range idAttr.FindAllStringSubmatch(page, -1) {
		ids[html.UnescapeString(m[1])]++
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("the anchor %q is on the page %d times", id, n)
		}
	}
	for _, m := range hrefAttr.FindAllStringSubmatch(page, -1) {
		if target := html.UnescapeString(m[1]); ids[target] == 0 {
			t.Errorf("a link leads to #%s, which is not on the page", target)
		}
	}

	// The page's operations, each the text from its section's start to the next's.
	sections := map[string]string{}
	starts := opSection.FindAllStringSubmatchIndex(page, -1)
	for i, s := range starts {
		end := len(page)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		sections[page[s[2]:s[3]]] = page[s[0]:end]
	}
	if len(sections) != len(ops) {
		t.Errorf("the page shows %d operations; api/openapi.yaml has %d", len(sections), len(ops))
	}
	for _, o := range ops {
		sec, ok := sections[o.id]
		if !ok {
			t.Errorf("%s %s: no section at #%s", o.method, o.path, o.id)
			continue
		}
		heading := `<span class="method m-` + strings.ToLower(o.method) + `">` + o.method + `</span> <span class="path">` +
			html.EscapeString(o.path) + `</span>`
		if !strings.Contains(sec, "<h3>"+heading+"</h3>") {
			t.Errorf("the section #%s is not headed %s %s", o.id, o.method, o.path)
		}
		if !strings.Contains(toc, `href="#`+o.id+`"`) {
			t.Errorf("the contents do not link to %s %s (#%s)", o.method, o.path, o.id)
		}
		for _, status := range o.statuses {
			if !strings.Contains(sec, `id="`+apidocs.ResponseAnchor(o.id, status)+`"`) {
				t.Errorf("%s %s: the response %s is not in its section", o.method, o.path, status)
			}
		}
	}
	for name := range d.Components.Schemas {
		anchor := apidocs.SchemaAnchor(name)
		if !strings.Contains(page, `<section class="card" id="`+anchor+`">`+"\n<h3>"+name+"</h3>") {
			t.Errorf("the schema %s is not at #%s under its name", name, anchor)
		}
		if !strings.Contains(toc, `href="#`+anchor+`"`) {
			t.Errorf("the contents do not link to the schema %s", name)
		}
	}
	for _, tag := range d.Tags {
		if !strings.Contains(toc, "<summary>"+tag.Name+" <span") || !strings.Contains(toc, `href="#`+apidocs.TagAnchor(tag.Name)+`"`) {
			t.Errorf("the contents have no entry for the tag %s", tag.Name)
		}
	}
}

// The page's headers: a Content-Security-Policy that allows nothing but the page's own style element,
// by its hash (no script, no other source, no frame); cacheable but always revalidated, with an ETag
// that a conditional request is answered 304 for; compressed with gzip for the clients that accept it
// (and only them), to the same page.
func TestReferenceHeaders(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, storetest.SQLite(t), server.Config{})
	resp, page := get(t, srv, "/docs/api")
	h := resp.Header
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllSubmatch(page, -1)
	if len(style) != 1 {
		t.Fatalf("the page has %d style elements, want 1", len(style))
	}
	sum := sha256.Sum256(style[0][1])
	want := "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	if got := h.Get("Content-Security-Policy"); got != want {
		t.Errorf("Content-Security-Policy: %s\nwant %s", got, want)
	}
	if bytes.Contains(page, []byte("<script")) || bytes.Contains(page, []byte(" style=")) {
		t.Error("the page has a script or a style attribute, which its policy refuses")
	}
	for k, v := range map[string]string{"Cache-Control": "no-cache", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Vary": "Accept-Encoding"} {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	etag := h.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{24}"$`).MatchString(etag) || h.Get("Content-Encoding") != "" {
		t.Fatalf("ETag %q, Content-Encoding %q", etag, h.Get("Content-Encoding"))
	}

	resp, zipped := get(t, srv, "/docs/api", "Accept-Encoding", "br;q=1, gzip;q=0.8")
	gzETag := resp.Header.Get("ETag")
	if resp.Header.Get("Content-Encoding") != "gzip" || gzETag == etag || len(zipped) > len(page)/5 {
		t.Fatalf("accepting gzip: Content-Encoding %q, ETag %q, %d bytes of %d", resp.Header.Get("Content-Encoding"), gzETag, len(zipped), len(page))
	}
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	if unzipped, err := io.ReadAll(zr); err != nil || !bytes.Equal(unzipped, page) {
		t.Fatalf("the compressed page is not the page (%v)", err)
	}
	if resp, _ := get(t, srv, "/docs/api", "Accept-Encoding", "gzip;q=0"); resp.Header.Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 refuses gzip, yet the page was compressed")
	}

	for _, c := range []struct {
		ifNoneMatch string
		status      int
	}{
		{etag, http.StatusNotModified},
		{"W/" + etag, http.StatusNotModified},
		{`"other", ` + gzETag, http.StatusNotModified},
		{"*", http.StatusNotModified},
		{`"other"`, http.StatusOK},
		{strings.Trim(etag, `"`), http.StatusOK}, // not an entity tag: the quotes are part of it
	} {
		resp, body := get(t, srv, "/docs/api", "If-None-Match", c.ifNoneMatch)
		if resp.StatusCode != c.status {
			t.Errorf("If-None-Match %s: %d, want %d", c.ifNoneMatch, resp.StatusCode, c.status)
		}
		if c.status == http.StatusNotModified && (len(body) != 0 || resp.Header.Get("ETag") != etag) {
			t.Errorf("If-None-Match %s: a 304 with %d bytes and ETag %q", c.ifNoneMatch, len(body), resp.Header.Get("ETag"))
		}
	}
	// The trailing slash is optional on this route as on every other.
	if resp, body := get(t, srv, "/docs/api/"); resp.StatusCode != http.StatusOK || !slices.Equal(body, page) {
		t.Errorf("GET /docs/api/: %d, %d bytes", resp.StatusCode, len(body))
	}
}
