package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
	"github.com/kassapay/kassa/internal/user"
)

// addUser adds a user of role with the password pw (the owner's hash of it) to the shop's merchant.
func addUser(t *testing.T, s *shop, email string, role user.Role) user.User {
	t.Helper()
	owner, err := user.CredentialsByEmail(context.Background(), s.srv.DB.Reader(), s.users[user.Owner].Email)
	if err != nil {
		t.Fatal(err)
	}
	var u user.User
	if err := s.srv.DB.Write(context.Background(), func(tx *store.Tx) error {
		u, err = user.Create(context.Background(), tx, user.New{MerchantID: s.merchantID, Email: email, Role: role, Hash: owner.Hash}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return u
}

// owners lists the ids of the merchant's owners.
func owners(t *testing.T, s *shop) []string {
	t.Helper()
	list, err := user.List(context.Background(), s.srv.DB.Reader(), s.merchantID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, u := range list {
		if u.Role == user.Owner {
			ids = append(ids, u.ID)
		}
	}
	return ids
}

// answer is a response's status, where it redirects, and its body.
type answer struct {
	status   int
	location string
	body     string
}

// postAtOnce sends each browser's form to its path at the same moment, and returns the answers in
// the same order.
func postAtOnce(t *testing.T, bs []*browser, paths []string, forms []url.Values) []answer {
	t.Helper()
	out := make([]answer, len(bs))
	errs := make([]error, len(bs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, b := range bs {
		req, _ := http.NewRequest("POST", b.base+paths[i], strings.NewReader(forms[i].Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		wg.Go(func() {
			<-start
			resp, err := b.c.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			out[i] = answer{resp.StatusCode, resp.Header.Get("Location"), string(body)}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// oneChanged checks that of two answers to racing changes exactly one made its change (back to the
// Staff page) and the other was refused: as the last owner's (409), or, when the first change had
// already made its sender no owner, as an owner's to make (403), or, when it had removed its sender,
// as a request without a session (to sign in). The merchant must have one owner left, whose index it
// returns.
func oneChanged(t *testing.T, what string, s *shop, got []answer, ids []string) int {
	t.Helper()
	left := owners(t, s)
	changed := 0
	for _, a := range got {
		switch {
		case a.status == http.StatusSeeOther && a.location == "/dashboard/staff":
			changed++
		case a.status == http.StatusSeeOther && a.location == "/dashboard/sign-in",
			a.status == http.StatusConflict && strings.Contains(a.body, "at least one owner"),
			a.status == http.StatusForbidden && strings.Contains(a.body, "Only an owner can manage owners."):
		default:
			t.Fatalf("%s: an answer %d %s, want a change or a refusal:\n%s", what, a.status, a.location, a.body)
		}
	}
	if changed != 1 || len(left) != 1 {
		t.Fatalf("%s: %d of the two changes made, owners left %v; want one change and one owner", what, changed, left)
	}
	if left[0] == ids[0] {
		return 0
	}
	return 1
}

// The last owner can be neither demoted nor removed, by itself or by anyone; an owner with another
// owner beside it may step down. Two owners who demote each other, or each themselves, at the same
// moment leave the merchant one owner, round after round: one change is made, the other refused (on
// PostgreSQL, where the two transactions run at once, the second waits for the first's owners and
// counts again). Two owners who remove each other at once: likewise.
func TestLastOwnerIsKept(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		s := newShop(t, db, server.Config{})
		first := s.users[user.Owner].ID
		a := s.browser(t)
		csrfA := a.signIn("owner@maple.example")
		for _, role := range []string{"admin", "reporting", "sales"} {
			resp, body := a.post("/dashboard/staff/"+first+"/role", url.Values{"csrf_token": {csrfA}, "role": {role}})
			wantStatus(t, "the only owner makes itself "+role, resp, body, http.StatusConflict)
		}
		resp, body := a.post("/dashboard/staff/"+first+"/remove", url.Values{"csrf_token": {csrfA}})
		wantStatus(t, "the only owner removes itself", resp, body, http.StatusConflict)
		if got := owners(t, s); len(got) != 1 || got[0] != first {
			t.Fatalf("owners after the refusals: %v", got)
		}

		second := addUser(t, s, "partner@maple.example", user.Owner)
		b := s.browser(t)
		csrfB := b.signIn("partner@maple.example")
		ids := []string{first, second.ID}
		bs, csrf := []*browser{a, b}, []string{csrfA, csrfB}
		// An owner beside another steps down, and is made owner again.
		resp, body = b.post("/dashboard/staff/"+second.ID+"/role", url.Values{"csrf_token": {csrfB}, "role": {"admin"}})
		wantStatus(t, "the second owner steps down", resp, body, http.StatusSeeOther)
		resp, body = a.post("/dashboard/staff/"+second.ID+"/role", url.Values{"csrf_token": {csrfA}, "role": {"owner"}})
		wantStatus(t, "the second made owner again", resp, body, http.StatusSeeOther)

		for round := range 60 {
			targets, what := []string{ids[1], ids[0]}, "owners demoting each other"
			if round%2 == 1 {
				targets, what = ids, "owners demoting themselves"
			}
			forms := make([]url.Values, 2)
			paths := make([]string, 2)
			for i := range 2 {
				paths[i], forms[i] = "/dashboard/staff/"+targets[i]+"/role", url.Values{"csrf_token": {csrf[i]}, "role": {"admin"}}
			}
			kept := oneChanged(t, fmt.Sprintf("round %d, %s", round, what), s, postAtOnce(t, bs, paths, forms), ids)
			// The owner left makes the other owner again, for the next round.
			resp, body := bs[kept].post("/dashboard/staff/"+ids[1-kept]+"/role", url.Values{"csrf_token": {csrf[kept]}, "role": {"owner"}})
			wantStatus(t, "an owner again", resp, body, http.StatusSeeOther)
		}

		forms := []url.Values{{"csrf_token": {csrfA}}, {"csrf_token": {csrfB}}}
		oneChanged(t, "owners removing each other", s,
			postAtOnce(t, bs, []string{"/dashboard/staff/" + ids[1] + "/remove", "/dashboard/staff/" + ids[0] + "/remove"}, forms), ids)
	})
}

// inviteRole is the role the Staff page's invitation form sends unless its user chooses another: the
// option marked selected, or else the first, as a browser does.
func inviteRole(t *testing.T, page string) string {
	t.Helper()
	sel := regexp.MustCompile(`(?s)<select id="invite-role" name="role">(.*?)</select>`).FindStringSubmatch(page)
	if sel == nil {
		t.Fatalf("no invitation role in the page:\n%s", page)
	}
	options := regexp.MustCompile(`<option value="([a-z]+)"( selected)?>`).FindAllStringSubmatch(sel[1], -1)
	if len(options) == 0 {
		t.Fatalf("no roles to invite as: %s", sel[1])
	}
	for _, o := range options {
		if o[2] != "" {
			return o[1]
		}
	}
	return options[0][1]
}

// An invitation is for the least role, sales, unless its sender chooses another: the form's role
// starts at sales for owners and admins alike, and an invitation sent without a role invites a
// sales user.
func TestInvitationDefaultsToSales(t *testing.T) {
	t.Parallel()
	s := newShop(t, storetest.SQLite(t), server.Config{})
	for _, role := range []user.Role{user.Owner, user.Admin} {
		b := s.browser(t)
		csrf := b.signIn(string(role) + "@maple.example")
		resp, body := b.get("/dashboard/staff")
		wantStatus(t, "the Staff page", resp, body, http.StatusOK)
		if got := inviteRole(t, body); got != string(user.Sales) {
			t.Errorf("%s: the invitation form sends role %q unless changed, want sales", role, got)
		}
		email := "new-" + string(role) + "@maple.example"
		resp, body = b.post("/dashboard/staff/invite", url.Values{"csrf_token": {csrf}, "email": {email}})
		wantStatus(t, string(role)+" invites without a role", resp, body, http.StatusOK)
		p, err := user.ByEmail(context.Background(), s.srv.DB.Reader(), email)
		var u user.User
		if err == nil {
			u, err = user.Staff(context.Background(), s.srv.DB.Reader(), s.merchantID, p.ID)
		}
		if err != nil || u.Role != user.Sales || !u.Pending {
			t.Fatalf("%s's invitation without a role: %+v, %v; want a sales user", role, u, err)
		}
		if !strings.Contains(body, "Invited "+email+" as Sales.") {
			t.Errorf("the page does not say the role:\n%s", body)
		}
	}
}
