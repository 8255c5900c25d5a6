package dashboard

// emptyState is what a list page shows in place of its table when the table has no row: a heading,
// one sentence on what the page is for, and the first action. A list that is empty because its
// filter excludes everything says that instead (noMatch), so that a merchant with data is never told
// there is none.
type emptyState struct {
	ID      string // the element's id: the page's "<list>-empty"
	Heading string
	About   string
	Action  link // the primary action; zero when the signed-in role may not take it
	Also    link // a second way to the same end, offered as "or …" beside Action only; zero for none
}

// link is an action of an empty state.
type link struct{ Label, Href string }

// noMatch is the empty state of a list whose filter excludes every row: about says what matched
// nothing, and the action is the unfiltered list at clear (offered to every role: it changes nothing).
func noMatch(id, about, clear string) *emptyState {
	return &emptyState{ID: id, Heading: "Nothing matches these filters", About: about, Action: link{"Clear filters", clear}}
}

// actionIf is l when the role may take it (may), and no action otherwise.
func actionIf(may bool, l link) link {
	if !may {
		return link{}
	}
	return l
}
