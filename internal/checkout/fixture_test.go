package checkout_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/server"
	"github.com/kassapay/kassa/internal/server/servertest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// account is a merchant of a test server with an API key holding every permission.
type account struct {
	srv     *servertest.Server
	m       *servertest.Merchant
	id      string // acct_…
	key     string
	keyID   string
	headers []string
}

func start(t *testing.T, db *store.DB, cfg server.Config) *servertest.Server {
	t.Helper()
	return servertest.Start(t, db, cfg)
}

// newAccount creates a merchant and a key of its own account with every permission.
func newAccount(t *testing.T, srv *servertest.Server) *account {
	t.Helper()
	m := srv.NewMerchant(t)
	a := &account{srv: srv, m: m, id: "acct_" + m.ID}
	k := createKey(t, srv, a.id, checkout.AllPermissions)
	a.key, a.keyID = k.Key, k.ID
	a.headers = []string{checkout.HeaderAPIKey, a.key, checkout.HeaderAccount, a.id}
	return a
}

// createKey creates an API key of accountID as the operator does.
func createKey(t *testing.T, srv *servertest.Server, accountID string, p checkout.Permissions) checkout.NewKey {
	t.Helper()
	return srv.NewAPIKey(t, accountID, p)
}

// do sends a v1 request with the account's key and account headers; hdr adds or replaces headers.
func (a *account) do(t *testing.T, method, path string, body any, hdr ...string) servertest.Response {
	t.Helper()
	return a.srv.Do(t, method, path, body, append(append([]string{}, a.headers...), hdr...)...)
}

// ok is do that fails t unless the answer is 200.
func (a *account) ok(t *testing.T, method, path string, body any, hdr ...string) servertest.Response {
	t.Helper()
	r := a.do(t, method, path, body, hdr...)
	if r.Status != 200 {
		t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Raw)
	}
	return r
}

// method creates a payment method for a card number and returns its id.
func (a *account) method(t *testing.T, number string) string {
	t.Helper()
	return a.ok(t, "POST", "/v1/payment-methods", cardBody(number)).Str("id")
}

func cardBody(number string) map[string]any {
	cvc := "123"
	if strings.HasPrefix(number, "34") || strings.HasPrefix(number, "37") {
		cvc = "1234"
	}
	return map[string]any{"type": "card", "card": map[string]any{"number": number, "exp_month": 12, "exp_year": 2040, "cvc": cvc}}
}

// intent creates a payment intent.
func (a *account) intent(t *testing.T, body map[string]any) servertest.Response {
	t.Helper()
	return a.ok(t, "POST", "/v1/payment-intents", body)
}

// wantError fails t unless r is the error status with the code and field.
func wantError(t *testing.T, r servertest.Response, status int, code, field string) {
	t.Helper()
	if r.Status != status || r.Str("error") != code || r.Str("field") != field {
		t.Fatalf("got %d %s; want %d %s field %q", r.Status, r.Raw, status, code, field)
	}
	if r.Str("message") == "" {
		t.Fatalf("error without a message: %s", r.Raw)
	}
}

// count runs a COUNT query.
func count(t *testing.T, db *store.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// execSQL runs a statement on the database directly, as a crash or an operator would leave it.
func execSQL(t *testing.T, db *store.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Raw().ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// intentRecords is, for a query's FROM, the changes of payment intents that are records of their
// operations, with the columns of the audit records they stand for.
const intentRecords = `(SELECT 'payment_intent/' || intent_id AS resource, operation, client_id, status AS detail, amount, transaction_id
	FROM payment_intent_changes WHERE operation IS NOT NULL) r`
