package apidocs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pb33f/go-yaml"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"
)

// The page's model: what the template shows, taken from the OpenAPI document once. Descriptions are
// already HTML (rendered from the document's Markdown by markdown.go); everything else is text that
// the template escapes.

// reference is the whole page.
type reference struct {
	Title, Version string
	Summary        template.HTML
	Intro          template.HTML
	Servers        []server
	Schemes        []scheme
	Groups         []group
	Webhooks       []operation
	Schemas        []namedSchema
}

// server is one of the document's servers.
type server struct {
	URL         string
	Description template.HTML
}

// scheme is a security scheme, anchored at its ID.
type scheme struct {
	ID, Name, Kind string
	Description    template.HTML
	Facts          []fact
}

// group is the operations of one tag, anchored at ID; Name is the tag's name as the document spells it.
type group struct {
	ID, Name    string
	Description template.HTML
	Operations  []operation
}

// operation is one method of one path (or of one webhook, whose Path is the webhook's name), anchored
// at ID, its operationId.
type operation struct {
	ID, Method, Path string
	Summary          template.HTML
	Description      template.HTML
	Deprecated       bool
	// Security lists the ways to authenticate, each a set of schemes used together (an empty set:
	// without a credential); none at all means that the operation needs no credential.
	Security   [][]schemeRef
	Parameters []parameter
	Body       *body
	Responses  []response
}

// schemeRef names a security scheme, linking to its ID, and the scopes it needs (OAuth 2).
type schemeRef struct {
	ID, Name string
	Scopes   []string
}

// parameter is a parameter of an operation, or a header of a response (In is empty).
type parameter struct {
	Name, In    string
	Required    bool
	Deprecated  bool
	Description template.HTML
	Schema      *schema
	Examples    []example
}

// body is an operation's request body.
type body struct {
	Required    bool
	Description template.HTML
	Content     []media
}

// response is one documented status of an operation, anchored at ID.
type response struct {
	ID, Status, Reason string
	Description        template.HTML
	Headers            []parameter
	Content            []media
}

// media is the content of a body or response in one media type.
type media struct {
	Type     string
	Schema   *schema
	Examples []example
}

// example is an example of a value, its value as indented JSON (a scalar as written); Name and the
// rest are those of a named example.
type example struct {
	Name, Summary string
	Description   template.HTML
	Value         string
	External      string // externalValue: the example's URL, shown, not fetched
}

// namedSchema is a component schema, anchored at ID.
type namedSchema struct {
	ID, Name string
	Schema   *schema
}

// schema is a schema as the page shows it. A schema that refers to a component schema is only its
// name (Ref) and a link: the component is shown once, in the schemas section.
type schema struct {
	Ref, RefID string // the component schema referred to, and its anchor
	// Type is the schema's types, e.g. "string", "string or null", "object"; an array's (one with
	// Items) leaves array out: it is shown as "array of" its Items, "or" the rest.
	Type        string
	Items       *schema
	Description template.HTML
	Facts       []fact
	Properties  []property
	// Additional is the schema of properties not named, when it has one; Closed says that there are
	// none (additionalProperties: false).
	Additional *schema
	Closed     bool
	// Variants are the schemas of oneOf, anyOf or allOf, which VariantsAre introduces.
	VariantsAre string
	Variants    []*schema
	Not         *schema
}

// HasDetails reports whether the page has more to show of s than its type.
func (s *schema) HasDetails() bool {
	return s.Ref == "" && (s.Description != "" || len(s.Facts) > 0 || len(s.Properties) > 0 || s.Additional != nil || s.Closed ||
		(s.Items != nil && s.Items.HasDetails()) || len(s.Variants) > 0 || s.Not != nil)
}

// property is a named property of an object schema.
type property struct {
	Name     string
	Required bool
	Schema   *schema
}

// fact is a constraint or an annotation of a schema: a label and the values it names (shown as code).
type fact struct {
	Label  string
	Values []string
}

// Anchors of the page's fixed sections, and the prefixes of the anchors of tags, security schemes and
// component schemas. An operation's anchor is its operationId, which none of these can be mistaken
// for unless an operationId is spelled like one (a test checks that every anchor is unique).
const (
	schemaPrefix = "schema-"
	tagPrefix    = "tag-"
	schemePrefix = "auth-"
)

// TagAnchor is the anchor of the operations of the tag name on the page.
func TagAnchor(name string) string { return tagPrefix + name }

// SchemaAnchor is the anchor of the component schema name on the page.
func SchemaAnchor(name string) string { return schemaPrefix + name }

// ResponseAnchor is the anchor of the response of status ("200", "4XX", "default") of the operation
// whose anchor is op.
func ResponseAnchor(op, status string) string { return op + "-" + status }

// builder turns the document's model into the page's.
type builder struct {
	md      *markdown
	doc     *v3.Document
	schemes map[string]bool // the names of the document's security schemes
}

func (b *builder) reference() (*reference, error) {
	d := b.doc
	p := &reference{Title: "API reference"}
	if d.Info != nil {
		if d.Info.Title != "" {
			p.Title = d.Info.Title + " API reference"
		}
		p.Version = d.Info.Version
		p.Summary = b.md.inline(d.Info.Summary)
		p.Intro = b.md.block(d.Info.Description)
	}
	for _, s := range d.Servers {
		p.Servers = append(p.Servers, server{URL: s.URL, Description: b.md.inline(s.Description)})
	}
	b.schemes = map[string]bool{}
	if d.Components != nil {
		for name, s := range d.Components.SecuritySchemes.FromOldest() {
			b.schemes[name] = true
			p.Schemes = append(p.Schemes, b.scheme(name, s))
		}
	}
	// Tags in the document's order, then any tag an operation names that the document does not
	// declare, then the operations without a tag.
	byTag := map[string]*group{}
	var order []string
	addGroup := func(name, description string) {
		if _, ok := byTag[name]; !ok {
			byTag[name] = &group{ID: TagAnchor(name), Name: name, Description: b.md.block(description)}
			order = append(order, name)
		}
	}
	for _, t := range d.Tags {
		addGroup(t.Name, t.Description)
	}
	if d.Paths != nil {
		for path, item := range d.Paths.PathItems.FromOldest() {
			for method, op := range item.GetOperations().FromOldest() {
				o, err := b.operation(method, path, item, op)
				if err != nil {
					return nil, err
				}
				tag := "other"
				if len(op.Tags) > 0 {
					tag = op.Tags[0]
				}
				addGroup(tag, "")
				byTag[tag].Operations = append(byTag[tag].Operations, o)
			}
		}
	}
	for _, name := range order {
		if g := byTag[name]; len(g.Operations) > 0 {
			p.Groups = append(p.Groups, *g)
		}
	}
	for name, item := range d.Webhooks.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			o, err := b.operation(method, name, item, op)
			if err != nil {
				return nil, err
			}
			p.Webhooks = append(p.Webhooks, o)
		}
	}
	if d.Components != nil {
		for name, sp := range d.Components.Schemas.FromOldest() {
			// Shown in full; a component that is only a $ref to another, as a link to it.
			p.Schemas = append(p.Schemas, namedSchema{ID: SchemaAnchor(name), Name: name, Schema: b.schema(sp, 0)})
		}
	}
	return p, nil
}

func (b *builder) scheme(name string, s *v3.SecurityScheme) scheme {
	out := scheme{ID: schemePrefix + name, Name: name, Kind: s.Type, Description: b.md.block(s.Description)}
	add := func(label, v string) {
		if v != "" {
			out.Facts = append(out.Facts, fact{Label: label, Values: []string{v}})
		}
	}
	switch s.Type {
	case "http":
		out.Kind = "HTTP " + s.Scheme
		add("header", "Authorization")
		add("bearer format", s.BearerFormat)
	case "apiKey":
		out.Kind = "API key"
		add(s.In, s.Name)
	case "openIdConnect":
		out.Kind = "OpenID Connect"
		add("discovery", s.OpenIdConnectUrl)
	case "oauth2":
		out.Kind = "OAuth 2"
		if f := s.Flows; f != nil {
			for _, flow := range []struct {
				name string
				f    *v3.OAuthFlow
			}{{"client credentials", f.ClientCredentials}, {"authorization code", f.AuthorizationCode},
				{"password", f.Password}, {"implicit", f.Implicit}} {
				if flow.f != nil {
					add(flow.name+": token URL", flow.f.TokenUrl)
					add(flow.name+": authorization URL", flow.f.AuthorizationUrl)
				}
			}
		}
	}
	return out
}

// operation is the page's view of op, the operation of method on path (or on a webhook) in item.
func (b *builder) operation(method, path string, item *v3.PathItem, op *v3.Operation) (operation, error) {
	o := operation{ID: op.OperationId, Method: strings.ToUpper(method), Path: path,
		Summary: b.md.inline(op.Summary), Description: b.md.block(op.Description),
		Deprecated: op.Deprecated != nil && *op.Deprecated}
	if o.ID == "" {
		// Every operation of Kassa's document has an operationId (the generated client names its
		// methods by them); one without still gets an anchor, made of its method and path.
		o.ID = "op-" + strings.ToLower(method) + "-" + slug(path)
	}
	security := op.Security
	if security == nil {
		security = b.doc.Security
	}
	for _, req := range security {
		all := []schemeRef{}
		for name, scopes := range req.Requirements.FromOldest() {
			if !b.schemes[name] {
				return o, fmt.Errorf("%s %s: security scheme %q is not in components/securitySchemes", o.Method, path, name)
			}
			all = append(all, schemeRef{ID: schemePrefix + name, Name: name, Scopes: scopes})
		}
		o.Security = append(o.Security, all)
	}
	// The path item's parameters apply to each operation, unless the operation has its own of the
	// same name and location.
	params := slices.Clone(op.Parameters)
	for _, p := range item.Parameters {
		if !slices.ContainsFunc(op.Parameters, func(q *v3.Parameter) bool { return q.Name == p.Name && q.In == p.In }) {
			params = append(params, p)
		}
	}
	for _, p := range params {
		o.Parameters = append(o.Parameters, b.parameter(p))
	}
	if rb := op.RequestBody; rb != nil {
		o.Body = &body{Required: rb.Required != nil && *rb.Required, Description: b.md.block(rb.Description), Content: b.content(rb.Content)}
	}
	if op.Responses != nil {
		for code, r := range op.Responses.Codes.FromOldest() {
			o.Responses = append(o.Responses, b.response(o.ID, code, r))
		}
		if op.Responses.Default != nil {
			o.Responses = append(o.Responses, b.response(o.ID, "default", op.Responses.Default))
		}
	}
	return o, nil
}

func (b *builder) parameter(p *v3.Parameter) parameter {
	out := parameter{Name: p.Name, In: p.In, Required: p.Required != nil && *p.Required, Deprecated: p.Deprecated,
		Description: b.md.block(p.Description), Examples: b.examples(p.Example, p.Examples)}
	if p.Schema != nil {
		out.Schema = b.schema(p.Schema, 0)
	} else if p.Content != nil {
		// A parameter with content has one media type, whose schema is the parameter's.
		for _, m := range p.Content.FromOldest() {
			out.Schema = b.schema(m.Schema, 0)
			break
		}
	}
	return out
}

func (b *builder) response(op, code string, r *v3.Response) response {
	out := response{ID: ResponseAnchor(op, code), Status: code, Description: b.md.block(r.Description), Content: b.content(r.Content)}
	switch n, err := strconv.Atoi(code); {
	case code == "default":
		out.Reason = "any other status"
	case err == nil:
		out.Reason = http.StatusText(n)
	case len(code) == 3 && strings.HasSuffix(strings.ToUpper(code), "XX"):
		out.Reason = "any " + code[:1] + "xx status"
	}
	for name, h := range r.Headers.FromOldest() {
		out.Headers = append(out.Headers, parameter{Name: name, Required: h.Required, Deprecated: h.Deprecated,
			Description: b.md.block(h.Description), Schema: b.schema(h.Schema, 0), Examples: b.examples(h.Example, h.Examples)})
	}
	return out
}

func (b *builder) content(c *orderedmap.Map[string, *v3.MediaType]) []media {
	var out []media
	for typ, m := range c.FromOldest() {
		md := media{Type: typ, Examples: b.examples(m.Example, m.Examples)}
		if m.Schema != nil {
			md.Schema = b.schema(m.Schema, 0)
		}
		out = append(out, md)
	}
	return out
}

func (b *builder) examples(one *yaml.Node, named *orderedmap.Map[string, *base.Example]) []example {
	var out []example
	if one != nil {
		out = append(out, example{Value: value(one, true)})
	}
	for name, e := range named.FromOldest() {
		ex := example{Name: name, Summary: e.Summary, Description: b.md.block(e.Description), External: e.ExternalValue}
		if e.Value != nil {
			ex.Value = value(e.Value, true)
		}
		out = append(out, ex)
	}
	return out
}

// maxDepth bounds the nesting of schemas on the page. Only a $ref can make schemas nest without end,
// and a $ref to a component schema is shown as a link, never followed; the bound stops a cycle of
// $refs elsewhere (into a path's schema, say), which are followed.
const maxDepth = 12

// schema is the page's view of sp: a link when sp refers to a component schema, else the schema.
func (b *builder) schema(sp *base.SchemaProxy, depth int) *schema {
	if sp == nil {
		return nil
	}
	if name, ok := strings.CutPrefix(sp.GetReference(), "#/components/schemas/"); ok && sp.IsReference() {
		return &schema{Ref: name, RefID: SchemaAnchor(name)}
	}
	return b.schemaOf(sp.Schema(), depth)
}

// schemaOf is the page's view of s.
func (b *builder) schemaOf(s *base.Schema, depth int) *schema {
	if s == nil {
		return &schema{Type: "any"}
	}
	if depth >= maxDepth {
		return &schema{Type: "…"}
	}
	out := &schema{Type: strings.Join(s.Type, " or "), Description: b.md.block(s.Description)}
	if s.Title != "" {
		out.Facts = append(out.Facts, fact{Label: "title", Values: []string{s.Title}})
	}
	if s.Const != nil {
		out.Facts = append(out.Facts, fact{Label: "always", Values: []string{value(s.Const, false)}})
	}
	if len(s.Enum) > 0 {
		f := fact{Label: "one of"}
		for _, e := range s.Enum {
			f.Values = append(f.Values, value(e, false))
		}
		out.Facts = append(out.Facts, f)
	}
	add := func(label string, v string) { out.Facts = append(out.Facts, fact{Label: label, Values: []string{v}}) }
	if s.Format != "" {
		add("format", s.Format)
	}
	if s.Pattern != "" {
		add("pattern", s.Pattern)
	}
	num := func(label string, v *float64) {
		if v != nil {
			add(label, strconv.FormatFloat(*v, 'f', -1, 64))
		}
	}
	count := func(label string, v *int64) {
		if v != nil {
			add(label, strconv.FormatInt(*v, 10))
		}
	}
	num("minimum", s.Minimum)
	num("maximum", s.Maximum)
	if v := s.ExclusiveMinimum; v != nil && v.IsB() {
		num("greater than", &v.B)
	}
	if v := s.ExclusiveMaximum; v != nil && v.IsB() {
		num("less than", &v.B)
	}
	num("multiple of", s.MultipleOf)
	count("min length", s.MinLength)
	count("max length", s.MaxLength)
	count("min items", s.MinItems)
	count("max items", s.MaxItems)
	count("min properties", s.MinProperties)
	count("max properties", s.MaxProperties)
	if s.UniqueItems != nil && *s.UniqueItems {
		out.Facts = append(out.Facts, fact{Label: "unique items"})
	}
	if s.Default != nil {
		add("default", value(s.Default, false))
	}
	if s.ReadOnly != nil && *s.ReadOnly {
		out.Facts = append(out.Facts, fact{Label: "read-only"})
	}
	if s.WriteOnly != nil && *s.WriteOnly {
		out.Facts = append(out.Facts, fact{Label: "write-only"})
	}
	if s.Deprecated != nil && *s.Deprecated {
		out.Facts = append(out.Facts, fact{Label: "deprecated"})
	}
	if len(s.Examples) > 0 || s.Example != nil {
		f := fact{Label: "example"}
		for _, e := range append(slices.Clip(s.Examples), s.Example) {
			if e != nil {
				f.Values = append(f.Values, value(e, false))
			}
		}
		if len(f.Values) > 1 {
			f.Label = "examples"
		}
		out.Facts = append(out.Facts, f)
	}
	if s.Items != nil && s.Items.IsA() {
		out.Items = b.schema(s.Items.A, depth+1)
		out.Type = strings.Join(slices.DeleteFunc(slices.Clone(s.Type), func(t string) bool { return t == "array" }), " or ")
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for name, p := range s.Properties.FromOldest() {
		out.Properties = append(out.Properties, property{Name: name, Required: required[name], Schema: b.schema(p, depth+1)})
	}
	if ap := s.AdditionalProperties; ap != nil {
		if ap.IsA() {
			out.Additional = b.schema(ap.A, depth+1)
		} else {
			out.Closed = !ap.B
		}
	}
	for _, v := range []struct {
		are string
		of  []*base.SchemaProxy
	}{{"All of", s.AllOf}, {"One of", s.OneOf}, {"Any of", s.AnyOf}} {
		if len(v.of) == 0 {
			continue
		}
		// A schema has at most one of the three in Kassa's document; one with several shows each
		// in turn, nested.
		target := out
		if out.VariantsAre != "" {
			target = &schema{}
			out.Variants = append(out.Variants, target)
		}
		target.VariantsAre = v.are
		for _, sp := range v.of {
			target.Variants = append(target.Variants, b.schema(sp, depth+1))
		}
	}
	if s.Not != nil {
		out.Not = b.schema(s.Not, depth+1)
	}
	return out
}

// value is the text of a value in the document: a scalar as written (null as null), anything else as
// JSON in the document's order, indented when pretty.
func value(n *yaml.Node, pretty bool) string {
	if n.Kind == yaml.ScalarNode {
		if n.Tag == "!!null" {
			return "null"
		}
		return n.Value
	}
	var out strings.Builder
	if err := writeJSON(&out, n, pretty, ""); err != nil {
		return n.Value
	}
	return out.String()
}

// writeJSON writes n as JSON, its mappings' keys in the document's order: when pretty, a member on a
// line of its own, indented two spaces more than indent, its container's.
func writeJSON(w *strings.Builder, n *yaml.Node, pretty bool, indent string) error {
	inner := indent + "  "
	member := func(i int) {
		if i > 0 {
			w.WriteString(",")
		}
		if pretty {
			w.WriteString("\n" + inner)
		}
	}
	end := func(members int, close string) {
		if pretty && members > 0 {
			w.WriteString("\n" + indent)
		}
		w.WriteString(close)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(w, n.Content[0], pretty, indent)
	case yaml.AliasNode:
		return writeJSON(w, n.Alias, pretty, indent)
	case yaml.SequenceNode:
		w.WriteString("[")
		for i, c := range n.Content {
			member(i)
			if err := writeJSON(w, c, pretty, inner); err != nil {
				return err
			}
		}
		end(len(n.Content), "]")
		return nil
	case yaml.MappingNode:
		w.WriteString("{")
		for i := 0; i+1 < len(n.Content); i += 2 {
			member(i / 2)
			if err := writeScalar(w, n.Content[i].Value); err != nil {
				return err
			}
			w.WriteString(":")
			if pretty {
				w.WriteString(" ")
			}
			if err := writeJSON(w, n.Content[i+1], pretty, inner); err != nil {
				return err
			}
		}
		end(len(n.Content)/2, "}")
		return nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return err
	}
	return writeScalar(w, v)
}

// writeScalar writes v as JSON, without JSON's escapes of <, > and & (the page escapes the text).
func writeScalar(w *strings.Builder, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return nil
}

// slug makes an anchor of a path: its letters, digits, dots and underscores, every other run of
// characters a single dash.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
