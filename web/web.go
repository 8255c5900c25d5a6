// Package web holds the browser-side files Kassa serves, embedded in the binary: the CardEncryption
// script, the hosted payment page (its template and script) and hpp.js, the shop's helper for it.
package web

import (
	"crypto/sha256"
	"crypto/sha512"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"html/template"
	"net/http"
	"strconv"

	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/httpapi"
)

//go:embed card-encryption.js hpp.js hosted-page.js hosted-page.html
var files embed.FS

// Script is one served script: its content, and the content-hashed name and integrity value that let
// a page pin this exact version (subresource integrity).
type Script struct {
	Name      string // e.g. card-encryption.js
	Versioned string // e.g. card-encryption.3f2a9c0d1e4b5a6f.js
	Integrity string // sha384-…, for the integrity attribute
	body      []byte
	etag      string
}

// The scripts.
var (
	// CardEncryption is the CardEncryption script.
	CardEncryption = mustScript("card-encryption.js")
	// HPP is hpp.js, the helper a shop's page uses to embed the hosted payment page.
	HPP = mustScript("hpp.js")
	// HostedPage is the hosted payment page's own script.
	HostedPage = mustScript("hosted-page.js")
)

// scriptNamed finds a script by its name or its versioned name.
func scriptNamed(file string) (*Script, bool) {
	for _, s := range []*Script{CardEncryption, HPP, HostedPage} {
		if file == s.Name || file == s.Versioned {
			return s, true
		}
	}
	return nil, false
}

// HostedPageTemplate is the hosted payment page (html/template).
var HostedPageTemplate = template.Must(template.ParseFS(files, "hosted-page.html"))

func mustScript(name string) *Script {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot be missing
	}
	sum := sha256.Sum256(b)
	sri := sha512.Sum384(b)
	short := hex.EncodeToString(sum[:8])
	base := name[:len(name)-len(".js")]
	return &Script{Name: name, Versioned: base + "." + short + ".js", Integrity: "sha384-" + base64.StdEncoding.EncodeToString(sri[:]),
		body: b, etag: `"` + short + `"`}
}

// Path is the script's versioned path on the server.
func (s *Script) Path() string { return "/js/" + s.Versioned }

// ServeScripts serves GET /js/{file}: the script under its plain name (cached briefly, revalidated by
// ETag) and under its content-hashed name (cached for a year: that name never changes content).
// Scripts are loaded by shops' pages on other origins, so the response allows cross-origin use.
func ServeScripts(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	s, ok := scriptNamed(file)
	h := w.Header()
	switch {
	case !ok:
		httpapi.WriteError(w, r, fault.NotFound("No script %s.", file))
		return
	case file == s.Name:
		h.Set("Cache-Control", "public, max-age=300")
		h.Set("Link", "<"+s.Path()+`>; rel="canonical"`)
	default:
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	}
	h.Set("ETag", s.etag)
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cross-Origin-Resource-Policy", "cross-origin")
	if r.Header.Get("If-None-Match") == s.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(s.body)))
	w.Write(s.body)
}
