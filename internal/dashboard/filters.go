package dashboard

import (
	"html/template"
	"net/url"
)

// A list's filter form waits collapsed behind a "Filter" disclosure (details and summary: no
// script), as Polaris's index filters do, and each filter the list applies shows above the list as a
// chip, "Result: APPROVED ×", whose × is a link to the same list without that filter. A list's
// filters live in its URL, so that a filtered list is a link to share, a bookmark, and the back
// button's; the chips are read from it.

// filterChip is a filter a list applies: what it filters by, and the list's address without it.
type filterChip struct {
	Label  string
	Remove template.URL
}

// filterParam is a filter's parameter in a list's URL, and its name as a chip says it.
type filterParam struct{ Name, Label string }

// chipsOf is a chip for each of params that active, the query of the filters the list at path
// applies (without its page cursors), has a value for, in params' order; show, when not nil, says a
// value as a person reads it (a staff user's e-mail for its id). A chip's link keeps every other
// filter of active that has a value, and drops the page cursors with the filter: a list filtered
// otherwise starts from its newest page.
func chipsOf(path string, active url.Values, params []filterParam, show func(name, value string) string) []filterChip {
	var out []filterChip
	for _, p := range params {
		v := active.Get(p.Name)
		if v == "" {
			continue
		}
		if show != nil {
			v = show(p.Name, v)
		}
		rest := url.Values{}
		for k, vs := range active {
			if k != p.Name && len(vs) > 0 && vs[0] != "" {
				rest[k] = vs
			}
		}
		href := path
		if len(rest) > 0 {
			href += "?" + rest.Encode()
		}
		out = append(out, filterChip{Label: p.Label + ": " + v, Remove: template.URL(href)}) // encoded: safe as it is
	}
	return out
}
