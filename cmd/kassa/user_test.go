package main_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// The user commands: create prints the user and a link to set its password (an invitation, 72
// hours) — or, for a person who signs in already at another merchant, adds it as it is — list prints the merchant's users and never a hash, reset-password prints a reset link
// (30 minutes), and with SMTP configured queues it in the outbox too. merchant create makes its
// e-mail the first owner, with a link when no password is given.
func TestUserCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := []string{"--data-dir", dir}
	m := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Maple Goods", "--email", "ops@maple.example"}, db...)...)
	id := m["merchant_id"].(string)
	if m["owner_user_id"] != id || !strings.HasPrefix(m["set_password_link"].(string), "http://127.0.0.1:8080/dashboard/password?token=") {
		t.Fatalf("merchant create without a password: %v", m)
	}
	if withPassword := cliJSON(t, append([]string{"merchant", "create", "--init", "--name", "Birch", "--email", "birch@example.com", "--password", "a long passphrase"}, db...)...); withPassword["set_password_link"] != nil {
		t.Fatalf("merchant create with a password printed a link: %v", withPassword)
	}
	u := cliJSON(t, append([]string{"user", "create", "--merchant-id", id, "--email", "Books@Maple.example", "--role", "Reporting",
		"--public-url", "https://pay.maple.example"}, db...)...)
	if u["role"] != "reporting" || u["email"] != "Books@Maple.example" || u["merchant_id"] != id || u["has_password"] != false || u["mailed"] != false ||
		!strings.HasPrefix(u["set_password_link"].(string), "https://pay.maple.example/dashboard/password?token=") {
		t.Fatalf("user create: %v", u)
	}
	// A person who signs in already (Birch's owner) joins Maple's staff as it is: no link, its password.
	if joined := cliJSON(t, append([]string{"user", "create", "--merchant-id", id, "--email", "birch@example.com", "--role", "sales"}, db...)...); joined["has_password"] != true ||
		joined["set_password_link"] != "" || joined["pending"] != false {
		t.Fatalf("user create for a person on another merchant's staff: %v", joined)
	}
	stdout, stderr, code := cli(t, append([]string{"user", "list", "--merchant-id", id}, db...)...)
	if code != 0 || strings.Contains(stdout, "argon2") || strings.Contains(stdout, "hash") {
		t.Fatalf("user list: %d %s %s", code, stdout, stderr)
	}
	list := decodeOne(t, stdout)
	users := list["users"].([]any)
	if len(users) != 3 || users[0].(map[string]any)["role"] != "owner" || users[1].(map[string]any)["user_id"] != u["user_id"] {
		t.Fatalf("user list: %v", list)
	}
	r := cliJSON(t, append([]string{"user", "reset-password", "--email", "books@maple.EXAMPLE"}, db...)...)
	if r["user_id"] != u["user_id"] || r["set_password_link"] == u["set_password_link"] || r["link_expires_at"].(float64)-u["created_at"].(float64) > 31*60*1000 {
		t.Fatalf("reset-password: %v", r)
	}
	stdout, stderr, code = cliEnv(t, []string{"KASSA_SMTP_URL=smtp://127.0.0.1:2525"}, append([]string{"user", "reset-password", "--email", "ops@maple.example"}, db...)...)
	mailed := decodeOne(t, stdout)
	if code != 0 || mailed["mailed"] != true {
		t.Fatalf("reset-password with SMTP: %d %s %s", code, stdout, stderr)
	}
	// The e-mail waits in the outbox sealed under the key-encryption key: the database's files hold
	// neither the link nor its token, and the keyring opens it.
	link := mailed["set_password_link"].(string)
	token := link[strings.Index(link, "token=")+len("token="):]
	sqlite := storetest.SQLiteAt(t, dir)
	storetest.NotStored(t, storetest.RawData(t, sqlite), map[string]string{"the mailed reset link": link, "its token": token})
	kek, err := os.ReadFile(filepath.Join(dir, "vault.key"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := envelope.ParseKEK(string(kek))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envelope.NewKeyring(context.Background(), sqlite, k, nil); err != nil {
		t.Fatal(err)
	}
	queued := 0
	for _, e := range billingtest.Outbox(t, sqlite) {
		if e.To == "ops@maple.example" && strings.Contains(e.Text, link) && strings.Contains(e.HTML, link) {
			queued++
		}
	}
	if queued != 1 {
		t.Fatalf("%d reset e-mails with the link in the outbox", queued)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"create without a role", []string{"user", "create", "--merchant-id", id, "--email", "x@maple.example"}, 2, "--role is required"},
		{"create with an unknown role", []string{"user", "create", "--merchant-id", id, "--email", "x@maple.example", "--role", "boss"}, 2, "--role must be"},
		{"create for no merchant", []string{"user", "create", "--merchant-id", "0000000000", "--email", "x@maple.example", "--role", "sales"}, 1, "no merchant"},
		{"create for someone on the staff already", []string{"user", "create", "--merchant-id", id, "--email", "OPS@maple.example", "--role", "sales"}, 1, "already on the merchant's staff"},
		{"create with a bad e-mail", []string{"user", "create", "--merchant-id", id, "--email", "ops", "--role", "sales"}, 1, "email must be"},
		{"create with a bad public URL", []string{"user", "create", "--merchant-id", id, "--email", "x@maple.example", "--role", "sales", "--public-url", "maple"}, 2, "--public-url"},
		{"list without a merchant", []string{"user", "list"}, 2, "--merchant-id is required"},
		{"list of no merchant", []string{"user", "list", "--merchant-id", "0000000000"}, 1, "no merchant"},
		{"reset of nobody", []string{"user", "reset-password", "--email", "nobody@maple.example"}, 1, "no user"},
		{"reset with a bad SMTP URL", []string{"user", "reset-password", "--email", "ops@maple.example", "--smtp-url", "mail.example"}, 2, "SMTP URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := cli(t, append(tc.args, db...)...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) || stdout != "" {
				t.Fatalf("exit %d, stderr %q, stdout %q; want %d and %q", code, stderr, stdout, tc.code, tc.msg)
			}
		})
	}
}

// The quickstart's dashboard: "kassa serve --demo" prints the demo owner's e-mail and a one-time
// link; the link sets a password, once, with which the owner signs in to the dashboard. Without an
// SMTP server the e-mails the owner makes Kassa send are recorded as not sent (demo mode), and
// Settings → E-mails, which the banner names, shows them without their links.
func TestDemoOwnerSignsIn(t *testing.T) {
	t.Parallel()
	srv := startServer(t, nil, "--data-dir", t.TempDir(), "--demo", "--billing-interval", "50ms")
	out := waitFor(t, srv, "/dashboard/password?token=")
	if !strings.Contains(out, srv.url+"/dashboard/settings/emails") {
		t.Fatalf("the banner does not say where the e-mails are:\n%s", out)
	}
	link := regexp.MustCompile(`(?m)^\s+(http\S+/dashboard/password\?token=\S+)$`).FindStringSubmatch(out)
	if link == nil || !strings.Contains(out, "demo@example.com") {
		t.Fatalf("no link for demo@example.com in:\n%s", out)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(link[1])
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("open the link: %v %v", resp, err)
	}
	resp.Body.Close()
	token, _ := url.Parse(link[1])
	set := url.Values{"token": {token.Query().Get("token")}, "password": {"demo passphrase"}, "confirm": {"demo passphrase"}}
	for i, want := range []int{http.StatusSeeOther, http.StatusNotFound} {
		resp, err := c.PostForm(srv.url+"/dashboard/password", set)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("set the password, try %d: %v %v", i+1, resp, err)
		}
		resp.Body.Close()
	}
	resp, err = c.PostForm(srv.url+"/dashboard/sign-in", url.Values{"email": {"demo@example.com"}, "password": {"demo passphrase"}})
	if err != nil || resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/dashboard" {
		t.Fatalf("sign in: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = c.Get(srv.url + "/dashboard")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the dashboard: %v %v", resp, err)
	}
	resp.Body.Close()

	page := func(path string) string {
		t.Helper()
		resp, err := c.Get(srv.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	csrf := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(page("/dashboard/staff"))
	if csrf == nil {
		t.Fatal("no csrf_token on the staff page")
	}
	resp, err = c.PostForm(srv.url+"/dashboard/staff/invite", url.Values{"csrf_token": {csrf[1]}, "email": {"books@example.com"}, "role": {"reporting"}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("invite: %v %v", resp, err)
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		emails := page("/dashboard/settings/emails")
		if strings.Contains(emails, "books@example.com") && strings.Contains(emails, "Not sent: demo mode") {
			if strings.Contains(emails, "token=") {
				t.Fatalf("the e-mails page shows a link: %s", emails)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the invitation never shows as not sent in demo mode:\n%s", emails)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(srv.stderr.String(), "wait in the outbox") {
		t.Fatalf("the demo server warns that e-mails wait:\n%s", srv.stderr)
	}
}
