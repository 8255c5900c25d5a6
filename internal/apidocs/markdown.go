package apidocs

import (
	"bytes"
	"html/template"
	"net/url"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// markdown renders the document's descriptions, CommonMark, as HTML that can be trusted on the page
// whatever a description holds:
//   - HTML written in a description is shown as the text it is, never passed through (a description
//     that names `<number>` outside backticks shows <number>);
//   - a link leads only to http, https or mailto URLs, or within the page or the site (a relative
//     URL); another link is its text alone;
//   - an image is its text alone, and a link to its URL when it could be one: the page loads nothing;
//   - a heading is a paragraph in bold, so that the page's own headings stay in order wherever a
//     description is shown.
//
// Everything else (paragraphs, emphasis, code, lists, block quotes, code blocks) is CommonMark's,
// rendered by goldmark, which escapes all text.
type markdown struct{ gm goldmark.Markdown }

func newMarkdown() *markdown {
	return &markdown{gm: goldmark.New(goldmark.WithRenderer(renderer.NewRenderer(renderer.WithNodeRenderers(
		util.Prioritized(html.NewRenderer(), 1000),
		util.Prioritized(safeRenderer{}, 100), // a lower number wins: these replace goldmark's own
	))))}
}

// block renders md as HTML blocks (paragraphs, lists…); "" is "".
func (m *markdown) block(md string) template.HTML {
	if strings.TrimSpace(md) == "" {
		return ""
	}
	var buf bytes.Buffer
	// Rendering into a buffer fails only when the buffer does; what a description holds cannot make
	// it fail.
	if err := m.gm.Convert([]byte(md), &buf); err != nil {
		return template.HTML(template.HTMLEscapeString(md))
	}
	return template.HTML(buf.String()) // built by the renderers above, which escape every text
}

// inline renders md, a line such as a summary, as phrasing content for a heading or a paragraph: the
// inside of its one paragraph. Text that is more than one paragraph (a list, say) is shown as the
// escaped text.
func (m *markdown) inline(md string) template.HTML {
	md = strings.TrimSpace(md)
	if md == "" {
		return ""
	}
	src := []byte(md)
	doc := m.gm.Parser().Parse(text.NewReader(src))
	p := doc.FirstChild()
	if p == nil || p.NextSibling() != nil || p.Kind() != ast.KindParagraph {
		return template.HTML(template.HTMLEscapeString(md))
	}
	var buf bytes.Buffer
	for c := p.FirstChild(); c != nil; c = c.NextSibling() {
		if err := m.gm.Renderer().Render(&buf, src, c); err != nil {
			return template.HTML(template.HTMLEscapeString(md))
		}
	}
	return template.HTML(buf.String())
}

// safeRenderer renders the nodes that markdown treats differently from goldmark.
type safeRenderer struct{}

func (safeRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, renderRawHTML)
	reg.Register(ast.KindHTMLBlock, renderHTMLBlock)
	reg.Register(ast.KindHeading, renderHeading)
	reg.Register(ast.KindLink, renderLink)
	reg.Register(ast.KindAutoLink, renderAutoLink)
	reg.Register(ast.KindImage, renderImage)
}

// renderRawHTML writes inline HTML as escaped text.
func renderRawHTML(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		segs := node.(*ast.RawHTML).Segments
		for i := range segs.Len() {
			seg := segs.At(i)
			w.Write(util.EscapeHTML(seg.Value(source)))
		}
	}
	return ast.WalkSkipChildren, nil
}

// renderHTMLBlock writes a block of HTML as an escaped paragraph of text.
func renderHTMLBlock(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.HTMLBlock)
	w.WriteString("<p>")
	lines := n.Lines()
	for i := range lines.Len() {
		line := lines.At(i)
		w.Write(util.EscapeHTML(line.Value(source)))
	}
	if n.HasClosure() {
		w.Write(util.EscapeHTML(n.ClosureLine.Value(source)))
	}
	w.WriteString("</p>\n")
	return ast.WalkSkipChildren, nil
}

func renderHeading(w util.BufWriter, _ []byte, _ ast.Node, entering bool) (ast.WalkStatus, error) {
	if entering {
		w.WriteString("<p><strong>")
	} else {
		w.WriteString("</strong></p>\n")
	}
	return ast.WalkContinue, nil
}

// safeURL reports whether a link may lead to u: an http, https or mailto URL, or one without a scheme
// (within the site or the page).
func safeURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch strings.ToLower(p.Scheme) {
	case "", "http", "https", "mailto":
		return true
	}
	return false
}

// link writes the start (entering) or the end of a link to dest whose text is node's children: the
// text alone when dest is not safe, and dest as the text when there is none (a link must have text).
func link(w util.BufWriter, node ast.Node, dest []byte, entering bool) (ast.WalkStatus, error) {
	if !safeURL(string(dest)) {
		return ast.WalkContinue, nil
	}
	if !entering {
		w.WriteString("</a>")
		return ast.WalkContinue, nil
	}
	w.WriteString(`<a href="`)
	w.Write(util.EscapeHTML(util.URLEscape(dest, true)))
	w.WriteString(`">`)
	if !node.HasChildren() {
		w.Write(util.EscapeHTML(dest))
	}
	return ast.WalkContinue, nil
}

func renderLink(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	return link(w, node, node.(*ast.Link).Destination, entering)
}

func renderAutoLink(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.AutoLink)
	label := n.Label(source)
	dest := n.URL(source)
	if n.AutoLinkType == ast.AutoLinkEmail && !bytes.HasPrefix(bytes.ToLower(dest), []byte("mailto:")) {
		dest = append([]byte("mailto:"), dest...)
	}
	if safeURL(string(dest)) {
		w.WriteString(`<a href="`)
		w.Write(util.EscapeHTML(util.URLEscape(dest, true)))
		w.WriteString(`">`)
		w.Write(util.EscapeHTML(label))
		w.WriteString("</a>")
	} else {
		w.Write(util.EscapeHTML(label))
	}
	return ast.WalkSkipChildren, nil
}

// renderImage writes an image's text (its alt text), as a link to the image when its URL is safe:
// the page's policy lets it load no image.
func renderImage(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	return link(w, node, node.(*ast.Image).Destination, entering)
}
