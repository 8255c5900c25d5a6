// Package apidocs serves Kassa's API reference at GET /docs/api: api/openapi.yaml, the document
// embedded in the binary, rendered on the server as one HTML page. The page shows every operation of
// the document, grouped by tag, each at an anchor named by its operationId (its responses at
// operationId-status), and then the webhooks and every component schema (at schema-Name), with
// their parameters, bodies, responses, headers, constraints and examples.
//
// The page needs no script and loads nothing: its one style sheet is inline, allowed by its hash in
// the page's Content-Security-Policy, so that the page can be the same bytes for every request. It is
// built once, on its first request, and served from memory, compressed for the clients that accept
// gzip, with an ETag; a browser revalidates it (Cache-Control: no-cache) and is answered 304 until
// the binary changes.
package apidocs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pb33f/libopenapi"

	"github.com/kassapay/kassa/api"
	"github.com/kassapay/kassa/internal/httpapi"
)

//go:embed page.html style.css
var files embed.FS

var (
	pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
		"lower": strings.ToLower,
		// statusClass is the class of a status, its first digit ("" for default).
		"statusClass": func(status string) string {
			if status == "" || status[0] < '1' || status[0] > '5' {
				return ""
			}
			return status[:1]
		},
	}).ParseFS(files, "page.html"))
	style = func() string {
		b, err := files.ReadFile("style.css")
		if err != nil {
			panic(err) // embedded at build time: cannot be missing
		}
		return string(b)
	}()
)

// rendered is a reference page, ready to serve: its HTML and the same compressed with gzip (a
// twentieth of its size), each with its ETag.
type rendered struct {
	html, gzip     []byte
	etag, gzipETag string
	csp            string
}

// build renders the OpenAPI 3.1 document doc as a reference page.
func build(doc []byte) (*rendered, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	ref, err := (&builder{md: newMarkdown(), doc: &m.Model}).reference()
	if err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	var buf bytes.Buffer
	err = pageTemplate.Execute(&buf, struct {
		Title     string
		CSS       template.CSS
		Reference *reference
	}{ref.Title, template.CSS(style), ref})
	if err != nil {
		return nil, fmt.Errorf("apidocs: render: %w", err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // the level is valid
	zw.Write(buf.Bytes())
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("apidocs: compress: %w", err)
	}
	sum := sha256.Sum256(buf.Bytes())
	tag := hex.EncodeToString(sum[:12])
	styleSum := sha256.Sum256([]byte(style))
	return &rendered{html: buf.Bytes(), gzip: gz.Bytes(), etag: `"` + tag + `"`, gzipETag: `"` + tag + `-gzip"`,
		// Nothing but the page's own style element, by its hash: no script, no image, no font, no
		// form, no frame, in no frame.
		csp: "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(styleSum[:]) +
			"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}, nil
}

// kassa is the reference of Kassa's own document, built on first use.
var kassa = sync.OnceValues(func() (*rendered, error) { return build(api.OpenAPI) })

// Handler serves GET /docs/api, the reference of api/openapi.yaml. It needs no credential.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := kassa()
		if err != nil {
			httpapi.WriteError(w, r, err) // a 500: the embedded document is checked by the tests
			return
		}
		p.ServeHTTP(w, r)
	})
}

// ServeHTTP writes the page, compressed when the request accepts gzip, or 304 Not Modified when the
// request's If-None-Match names the page's ETag, compressed or not.
func (p *rendered) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	httpapi.SetPageHeaders(h, p.csp)
	// The page holds nothing secret and is the same for everyone: any cache may keep it, and must ask
	// whether it is still current before showing it again.
	h.Set("Cache-Control", "no-cache")
	h.Add("Vary", "Accept-Encoding")
	body, etag := p.html, p.etag
	compressed := acceptsGzip(r.Header.Get("Accept-Encoding"))
	if compressed {
		body, etag = p.gzip, p.gzipETag
	}
	h.Set("ETag", etag)
	if noneMatch(r.Header.Get("If-None-Match"), p.etag, p.gzipETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if compressed {
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// noneMatch reports whether an If-None-Match header names one of etags, or any ("*"), by the weak
// comparison that RFC 9110 §13.1.2 has for it (W/"x" and "x" are the same).
func noneMatch(header string, etags ...string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || slices.Contains(etags, tag) {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header names gzip with a weight other than 0 (RFC
// 9110 §12.5.3). A client that names no coding, or only "*", is sent the page as it is.
func acceptsGzip(header string) bool {
	for coding := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(coding, ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		for param := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(param), "=")
			if strings.EqualFold(k, "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}
