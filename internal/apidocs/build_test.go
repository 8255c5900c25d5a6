package apidocs

import (
	"strings"
	"testing"
)

// A description is Markdown, and whatever it holds, the page shows it as text or as the common
// subset of HTML: HTML written in it is escaped, never passed through; links lead only to http, https,
// mailto or relative URLs; an image is a link, never loaded; a heading is bold text, so that the page's
// headings stay in order.
func TestMarkdownIsSafe(t *testing.T) {
	t.Parallel()
	md := newMarkdown()
	for _, c := range []struct {
		name, in string
		want     []string // each in the output
		never    []string // none in the output
	}{
		{"paragraphs and inline", "A *soft* **strong** `code <b>` [link](https://example.com/a?b=1&c=2).\n\nSecond.",
			[]string{"<p>A <em>soft</em> <strong>strong</strong> <code>code &lt;b&gt;</code> <a href=\"https://example.com/a?b=1&amp;c=2\">link</a>.</p>", "<p>Second.</p>"}, nil},
		{"lists", "- one\n- two\n\n1. first\n2. second",
			[]string{"<ul>\n<li>one</li>\n<li>two</li>\n</ul>", "<ol>\n<li>first</li>"}, nil},
		{"relative and mailto links", "[here](#schema-Error), [there](/docs/api), <ops@example.com>",
			[]string{`<a href="#schema-Error">here</a>`, `<a href="/docs/api">there</a>`, `<a href="mailto:ops@example.com">ops@example.com</a>`}, nil},
		{"inline HTML", "a <script>alert(1)</script> and <img src=x onerror=alert(1)> and invoice-<number>.pdf",
			[]string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;", "invoice-&lt;number&gt;.pdf"},
			[]string{"<script", "<img", "<number>", "raw HTML omitted"}},
		{"an HTML block", "<div onclick=\"x()\">\n<iframe src=\"https://evil.example\"></iframe>\n</div>",
			[]string{"&lt;div onclick=&quot;x()&quot;&gt;", "&lt;iframe"}, []string{"<div", "<iframe"}},
		{"script URLs", "[a](javascript:alert(1)) [b](JavaScript:alert(1)) [c](data:text/html,x) [d](vbscript:x) <javascript:alert(1)>",
			[]string{"a", "b", "c", "d"}, []string{"<a", "avascript:alert(1)\"", "href"}},
		{"images", "![diagram](https://example.com/d.png) ![x](javascript:alert(1)) ![](https://example.com/e.png)",
			[]string{`<a href="https://example.com/d.png">diagram</a>`, `<a href="https://example.com/e.png">https://example.com/e.png</a>`},
			[]string{"<img", "javascript"}},
		{"headings", "# Title\n\n## Part\nText",
			[]string{"<p><strong>Title</strong></p>", "<p><strong>Part</strong></p>"}, []string{"<h1", "<h2"}},
	} {
		got := string(md.block(c.in))
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q\nrenders %q, without %q", c.name, c.in, got, w)
			}
		}
		for _, n := range c.never {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q\nrenders %q, with %q", c.name, c.in, got, n)
			}
		}
	}

	// A summary is shown inside a heading or a paragraph: the inside of its one paragraph, or the
	// escaped text when it is more than a paragraph.
	for in, want := range map[string]string{
		"Charge a `card` <b>now</b>": "Charge a <code>card</code> &lt;b&gt;now&lt;/b&gt;",
		"- a list <i>":               "- a list &lt;i&gt;",
		"# Heading":                  "# Heading",
		"":                           "",
	} {
		if got := string(md.inline(in)); got != want {
			t.Errorf("inline %q: %q, want %q", in, got, want)
		}
	}
}

// small is an OpenAPI 3.1 document with what Kassa's does not have (yet): an operation without an
// operationId, parameters of the path item, examples of every kind, an OAuth 2 scheme with scopes,
// and a schema with several combinators.
const small = `openapi: 3.1.0
info: {title: Small, version: "2"}
components:
  securitySchemes:
    oauth:
      type: oauth2
      flows: {clientCredentials: {tokenUrl: /token, scopes: {read: Read}}}
  schemas:
    Thing:
      type: object
      required: [id]
      properties:
        id: {type: string, examples: [th_1]}
        tags: {type: [array, "null"], items: {type: string, enum: [a, b]}, maxItems: 3}
        mixed:
          oneOf: [{type: string}, {type: integer}]
          anyOf: [{type: string, minLength: 1}]
        extra: {type: object, additionalProperties: {type: integer, minimum: 0}}
paths:
  /things/{id}:
    parameters:
      - {name: id, in: path, required: true, description: The <b>thing</b>, schema: {type: string}}
      - {name: verbose, in: query, schema: {type: boolean}}
    get:
      security: [{oauth: [read]}, {}]
      parameters:
        - {name: verbose, in: query, description: Overridden, schema: {type: boolean, default: false}}
        - {name: X-Trace, in: header, schema: {type: string}, example: abc}
      responses:
        "200":
          description: The thing
          headers:
            ETag: {description: Its version, schema: {type: string}}
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
              examples:
                first: {summary: A first thing, value: {tags: [a], id: th_1, n: 2, ok: true, none: null, empty: {}}}
                remote: {externalValue: "https://example.com/thing.json"}
        4XX:
          description: A fault
          content:
            application/json:
              schema: {type: object}
              example: {error: "bad <thing>"}
`

// A document with what Kassa's lacks renders it all: the anchor of an operation without an
// operationId, the path item's parameters unless the operation has its own, the examples, scopes
// and optional authentication, and the schemas' combinators and constraints.
func TestBuildSmallDocument(t *testing.T) {
	t.Parallel()
	p, err := build([]byte(small))
	if err != nil {
		t.Fatal(err)
	}
	page := string(p.html)
	for _, w := range []string{
		`<section class="card op" id="op-get-things-id">`,
		`id="op-get-things-id-200"`, `id="op-get-things-id-4XX"`, `<span class="status s4">4XX</span> any 4xx status`,
		`<code class="name">id</code> <span class="type">string</span> <span class="req">required</span> <span class="in">· in path</span>`,
		`The &lt;b&gt;thing&lt;/b&gt;`,
		"Overridden", "default: <code>false</code>",
		`<code class="name">X-Trace</code>`, "<pre><code>abc</code></pre>",
		`Authentication: <a href="#auth-oauth">oauth</a> (scopes <code>read</code>) or none`,
		"client credentials: token URL: <code>/token</code>",
		`<code class="name">ETag</code> <span class="type">string</span></p>`, "Its version",
		`Content <code>application/json</code>: <span class="type"><a href="#schema-Thing">Thing</a></span>`,
		// The value as JSON, in the document's order.
		"Example <code>first</code>: A first thing</p>\n\n<pre><code>" + strings.ReplaceAll(`{
  "tags": [
    "a"
  ],
  "id": "th_1",
  "n": 2,
  "ok": true,
  "none": null,
  "empty": {}
}`, `"`, "&#34;") + "</code></pre>",
		`At <a href="https://example.com/thing.json">https://example.com/thing.json</a>`,
		"&#34;error&#34;: &#34;bad &lt;thing&gt;&#34;",
		`<span class="type">array of <span class="type">string</span> or null</span>`, "one of: <code>a</code>, <code>b</code>", "max items: <code>3</code>",
		"example: <code>th_1</code>",
		"One of:", "Any of:", "min length: <code>1</code>",
		`Any other property: <span class="type">integer</span>`, "minimum: <code>0</code>",
	} {
		if !strings.Contains(page, w) {
			t.Errorf("the page lacks %s", w)
		}
	}
	// The path item's verbose is the operation's: shown once.
	if n := strings.Count(page, `<code class="name">verbose</code>`); n != 1 {
		t.Errorf("verbose is shown %d times", n)
	}
}

// A document that names a security scheme it does not define is refused with the scheme's name,
// rather than rendered with a dead link.
func TestBuildRefusesUnknownScheme(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(small, "[{oauth: [read]}, {}]", "[{missing: []}]", 1)
	if _, err := build([]byte(doc)); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Fatalf("build: %v", err)
	}
}
