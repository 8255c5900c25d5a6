package invoice

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/hostedpage"
	"github.com/kassapay/kassa/internal/httpapi"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/money"
	"github.com/kassapay/kassa/internal/payment"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/vault"
	"github.com/kassapay/kassa/internal/velocity"
)

const columns = `id, lookup_id, merchant_id, invoice_number, status, pay_key_sealed, currency, scale, due_date, tax_rate, items,
	discount_amount, shipping_amount, subtotal_amount, tax_amount, total_amount, customer_lookup_id, customer_email,
	customer_first_name, customer_last_name, customer_company, customer_telephone, customer_address1, customer_address2,
	customer_city, customer_province, customer_country, customer_postal_code, notes, terms, custom_fields, version, sent_at, paid_at,
	created_at, updated_at, COALESCE(intent_id, ''), COALESCE(payment_info, ''), reminder_days, reminders_sent, reminded_until, sent_to,
	COALESCE(session_id, '')`

func scan(s interface{ Scan(...any) error }) (Invoice, error) {
	var inv Invoice
	var status, items, custom, info, reminders string
	var sent, paid, reminded sql.NullInt64
	var created, updated int64
	cu := &inv.Customer
	err := s.Scan(&inv.ID, &inv.LookupID, &inv.MerchantID, &inv.Number, &status, &inv.sealedKey, &inv.Currency.Code, &inv.Currency.Digits,
		&inv.DueDate, &inv.TaxRate, &items, &inv.Discount, &inv.Shipping, &inv.Totals.Subtotal, &inv.Totals.Tax, &inv.Totals.Total,
		&cu.LookupID, &cu.Email, &cu.FirstName, &cu.LastName, &cu.Company, &cu.Telephone, &cu.Address1, &cu.Address2, &cu.City,
		&cu.Province, &cu.Country, &cu.PostalCode, &inv.Notes, &inv.Terms, &custom, &inv.Version, &sent, &paid, &created, &updated,
		&inv.IntentID, &info, &reminders, &inv.RemindersSent, &reminded, &inv.SentTo, &inv.SessionID)
	if err != nil {
		return inv, err
	}
	inv.Status = Status(status)
	if err := json.Unmarshal([]byte(items), &inv.Items); err != nil {
		return inv, err
	}
	if err := json.Unmarshal([]byte(custom), &inv.CustomFields); err != nil {
		return inv, err
	}
	if err := json.Unmarshal([]byte(reminders), &inv.ReminderDays); err != nil {
		return inv, err
	}
	if info != "" {
		inv.Payment = new(Payment)
		if err := json.Unmarshal([]byte(info), inv.Payment); err != nil {
			return inv, err
		}
	}
	if sent.Valid {
		inv.SentAt = time.UnixMilli(sent.Int64)
	}
	if paid.Valid {
		inv.PaidAt = time.UnixMilli(paid.Int64)
	}
	if reminded.Valid {
		inv.RemindedUntil = time.UnixMilli(reminded.Int64)
	}
	inv.CreatedAt, inv.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return inv, nil
}

// read reads one of the merchant's invoices by its lookup_id or its id, its pay key left sealed:
// another merchant's, or none, is a 404 (wire-contract.md: "A merchant never learns that another
// merchant's id exists").
func read(ctx context.Context, q store.Querier, merchantID, ref string) (Invoice, error) {
	where := "lookup_id = $2"
	var arg any = ref
	if id, err := strconv.ParseInt(ref, 10, 64); err == nil && id > 0 {
		where, arg = "id = $2", id
	}
	inv, err := scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM invoices WHERE merchant_id = $1 AND `+where, merchantID, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return Invoice{}, fault.NotFound("No invoice %s.", ref)
	}
	return inv, err
}

// Get reads, through q, one of the merchant's invoices by its lookup_id or its id, with its pay key
// opened: another merchant's, or none, is a 404.
func (s *Service) Get(ctx context.Context, q store.Querier, merchantID, ref string) (Invoice, error) {
	inv, err := read(ctx, q, merchantID, ref)
	if err == nil {
		err = s.open(&inv)
	}
	return inv, err
}

// payKeyLength is the length of a pay key: crypto/rand.Text's 26 characters of [A-Z2-7], 130 bits.
const payKeyLength = 26

// keyHash is what pay_key_hash holds of the pay key key: its SHA-256, in hex. The key is 130 random
// bits, so a plain hash gives nothing to try against; the links find their invoice by it.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// keyAAD binds a sealed pay key to its invoice, by the lookup_id it is stored with.
func keyAAD(lookupID string) []byte { return append([]byte("kassa invoice pay key\x00"), lookupID...) }

// open opens inv's sealed pay key into PayKey.
func (s *Service) open(inv *Invoice) error {
	key, err := s.ring.Open(inv.sealedKey, keyAAD(inv.LookupID))
	if err != nil {
		return fmt.Errorf("invoice %s: the pay key does not open: %w", inv.LookupID, err)
	}
	inv.PayKey = string(key)
	return nil
}

// byPayKey reads the invoice whose public links' secret is key, by the key's hash (the database holds
// no key in clear). The key is the one the link carries: the row matched its hash.
func byPayKey(ctx context.Context, q store.Querier, key string) (Invoice, error) {
	inv, err := scan(q.QueryRowContext(ctx, `SELECT `+columns+` FROM invoices WHERE pay_key_hash = $1`, keyHash(key)))
	if errors.Is(err, sql.ErrNoRows) {
		return Invoice{}, fault.NotFound("No such invoice.")
	}
	if err != nil {
		return Invoice{}, err
	}
	inv.PayKey = key
	return inv, nil
}

// sealBatch is how many invoices of an earlier version one transaction of sealKeys seals.
const sealBatch = 500

// sealKeys seals the pay keys that an earlier version stored in clear (migration 00053 left each in
// pay_key_hash, with no pay_key_sealed): each row gets its key's hash and the key sealed, by a
// compare-and-set, so that nodes starting at once seal each row once. It runs before the service
// serves a link.
func (s *Service) sealKeys(ctx context.Context) error {
	type legacy struct {
		id            int64
		lookupID, key string
	}
	for after := int64(0); ; {
		var rows []legacy
		err := s.db.Read(ctx, func(q store.Querier) error {
			rs, err := q.QueryContext(ctx, `SELECT id, lookup_id, pay_key_hash FROM invoices WHERE pay_key_sealed IS NULL AND id > $1
				ORDER BY id LIMIT $2`, after, sealBatch)
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				var r legacy
				if err := rs.Scan(&r.id, &r.lookupID, &r.key); err != nil {
					return err
				}
				rows = append(rows, r)
			}
			return rs.Err()
		})
		if err != nil || len(rows) == 0 {
			return err
		}
		err = s.db.Write(ctx, func(tx *store.Tx) error {
			for _, r := range rows {
				if _, err := tx.ExecContext(ctx, `UPDATE invoices SET pay_key_hash = $2, pay_key_sealed = $3
					WHERE id = $1 AND pay_key_hash = $4 AND pay_key_sealed IS NULL`,
					r.id, keyHash(r.key), s.ring.Seal([]byte(r.key), keyAAD(r.lookupID)), r.key); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("invoice: seal the pay keys of an earlier version: %w", err)
		}
		after = rows[len(rows)-1].id
	}
}

func numberTaken() error {
	return fault.Conflict("invoice_number_taken", "This merchant already has an invoice of that invoice_number.")
}

// customerOf fills in the customer of inv from the vault when customer_lookup_id names one of the
// merchant's customers: the contact fields the body left empty take the customer's. An id that names
// no customer of the merchant is a 400 naming customer_lookup_id.
func customerOf(ctx context.Context, q store.Querier, merchantID string, cu *Customer) error {
	if cu.LookupID == "" {
		return nil
	}
	var v Customer
	err := q.QueryRowContext(ctx, `SELECT email, first_name, last_name, company, telephone, address1, address2, city, province, country,
		postal_code FROM customers WHERE merchant_id = $1 AND lookup_id = $2`, merchantID, cu.LookupID).Scan(&v.Email, &v.FirstName,
		&v.LastName, &v.Company, &v.Telephone, &v.Address1, &v.Address2, &v.City, &v.Province, &v.Country, &v.PostalCode)
	if errors.Is(err, sql.ErrNoRows) {
		return fault.Invalid("customer_lookup_id", "customer_lookup_id %s is not a customer of this merchant", cu.LookupID)
	}
	if err != nil {
		return err
	}
	for _, f := range []struct {
		dst *string
		src string
	}{{&cu.Email, v.Email}, {&cu.FirstName, v.FirstName}, {&cu.LastName, v.LastName},
		{&cu.Company, v.Company}, {&cu.Telephone, v.Telephone}, {&cu.Address1, v.Address1}, {&cu.Address2, v.Address2},
		{&cu.City, v.City}, {&cu.Province, v.Province}, {&cu.Country, v.Country}, {&cu.PostalCode, v.PostalCode}} {
		if *f.dst == "" {
			*f.dst = f.src
		}
	}
	return nil
}

func (inv Invoice) jsonColumns() (items, custom, reminders string) {
	it, _ := json.Marshal(inv.Items)
	if inv.CustomFields == nil {
		inv.CustomFields = map[string]string{}
	}
	cf, _ := json.Marshal(inv.CustomFields)
	if inv.ReminderDays == nil {
		inv.ReminderDays = []int{}
	}
	rd, _ := json.Marshal(inv.ReminderDays)
	return string(it), string(cf), string(rd)
}

func nullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// insert writes a new invoice, a DRAFT: nothing for the billing engine to do until it is sent.
func insert(ctx context.Context, tx *store.Tx, inv *Invoice) error {
	items, custom, reminders := inv.jsonColumns()
	cu := inv.Customer
	return tx.QueryRowContext(ctx, `INSERT INTO invoices (lookup_id, merchant_id, invoice_number, status, pay_key_hash, pay_key_sealed,
		currency, scale, due_date, tax_rate, items, discount_amount, shipping_amount, subtotal_amount, tax_amount, total_amount,
		customer_lookup_id, customer_email, customer_first_name, customer_last_name, customer_company, customer_telephone,
		customer_address1, customer_address2, customer_city, customer_province, customer_country, customer_postal_code, notes, terms,
		custom_fields, created_at, updated_at, reminder_days)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25,
		$26, $27, $28, $29, $30, $31, $32, $32, $33) RETURNING id`,
		inv.LookupID, inv.MerchantID, inv.Number, string(inv.Status), keyHash(inv.PayKey), inv.sealedKey, inv.Currency.Code,
		inv.Currency.Digits, inv.DueDate, inv.TaxRate, items, inv.Discount, inv.Shipping, inv.Totals.Subtotal, inv.Totals.Tax,
		inv.Totals.Total, cu.LookupID, cu.Email, cu.FirstName, cu.LastName, cu.Company, cu.Telephone, cu.Address1, cu.Address2, cu.City,
		cu.Province, cu.Country, cu.PostalCode,
		inv.Notes, inv.Terms, custom, inv.CreatedAt.UnixMilli(), reminders).Scan(&inv.ID)
}

// concurrentUpdate is the 409 of a change made to an invoice while the request ran: it is retried.
func concurrentUpdate(inv Invoice) error {
	return fault.Busy("concurrent_update", "Invoice %s changed while this request ran; retry it.", inv.LookupID)
}

// changedOne is the error of a statement meant to change inv's one row at the version read: its own,
// or concurrentUpdate when the row had changed meanwhile.
func changedOne(r sql.Result, err error, inv Invoice) error {
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		if err == nil {
			err = concurrentUpdate(inv)
		}
		return err
	}
	return nil
}

// save writes every field of an existing invoice, unless it changed since it was read (a cancellation
// racing a send, on PostgreSQL where both read it at once): that is a 409 concurrent_update to retry.
// It schedules the invoice's next check by the billing engine from its due date and reminders in
// loc, its merchant's time zone (overdue.go).
func save(ctx context.Context, tx *store.Tx, inv Invoice, loc *time.Location) error {
	items, custom, reminders := inv.jsonColumns()
	cu := inv.Customer
	r, err := tx.ExecContext(ctx, `UPDATE invoices SET invoice_number = $2, status = $3, currency = $4, scale = $5, due_date = $6,
		tax_rate = $7, items = $8, discount_amount = $9, shipping_amount = $10, subtotal_amount = $11, tax_amount = $12,
		total_amount = $13, customer_lookup_id = $14, customer_email = $15, customer_first_name = $16, customer_last_name = $17,
		customer_company = $18, customer_telephone = $19, customer_address1 = $20, customer_address2 = $21, customer_city = $22,
		customer_province = $23, customer_country = $24, customer_postal_code = $25, notes = $26, terms = $27, custom_fields = $28,
		sent_at = $29, updated_at = $30, reminder_days = $32, reminders_sent = $33, reminded_until = $34, sent_to = $35,
		next_check = $36, version = version + 1 WHERE id = $1 AND version = $31`,
		inv.ID, inv.Number, string(inv.Status), inv.Currency.Code, inv.Currency.Digits, inv.DueDate, inv.TaxRate, items, inv.Discount,
		inv.Shipping, inv.Totals.Subtotal, inv.Totals.Tax, inv.Totals.Total, cu.LookupID, cu.Email, cu.FirstName, cu.LastName,
		cu.Company, cu.Telephone, cu.Address1, cu.Address2, cu.City, cu.Province, cu.Country, cu.PostalCode, inv.Notes, inv.Terms,
		custom, nullMillis(inv.SentAt), inv.UpdatedAt.UnixMilli(), inv.Version, reminders, inv.RemindersSent,
		nullMillis(inv.RemindedUntil), inv.SentTo, nullMillis(inv.nextCheck(loc)))
	return changedOne(r, err, inv)
}

// Filter selects the invoices of a list.
type Filter struct {
	Limit            int
	Before, After    int64 // row ids of the paging cursors
	Status           Status
	CustomerEmail    string
	CustomerLookupID string
	InvoiceNumber    string
	AmountMin        int64 // total_amount at least, in 10^-4 of the currency's major unit; -1 for none
	AmountMax        int64 // total_amount at most, likewise; -1 for none
	Currency         string
	From, To         time.Time // created_at within [From, To)
}

// amountScale is the decimals of a list's amount bounds: the most any currency has (CLF).
const amountScale = 4

func pow10(n int) int64 {
	v := int64(1)
	for range n {
		v *= 10
	}
	return v
}

// conds are a statement's conditions and their arguments, numbered in the order they are added.
type conds struct {
	where []string
	args  []any
}

// add adds cond, whose ? is the argument v.
func (c *conds) add(cond string, v any) {
	c.args = append(c.args, v)
	c.where = append(c.where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(c.args))))
}

// sql is the conditions as a WHERE clause's.
func (c *conds) sql() string { return strings.Join(c.where, " AND ") }

// where is the condition of the merchant's invoices that f selects, paging aside: the list's and the
// sums'.
func (f Filter) where(merchantID string) *conds {
	c := &conds{}
	add := c.add
	add("merchant_id = ?", merchantID)
	if f.Status != "" {
		add("status = ?", string(f.Status))
	}
	if f.CustomerEmail != "" {
		add("LOWER(customer_email) = LOWER(?)", f.CustomerEmail)
	}
	if f.CustomerLookupID != "" {
		add("customer_lookup_id = ?", f.CustomerLookupID)
	}
	if f.InvoiceNumber != "" {
		add("invoice_number = ?", f.InvoiceNumber)
	}
	if f.Currency != "" {
		add("currency = ?", f.Currency)
	}
	// The bounds are decimal amounts; each row's total is in its own currency's minor units, so the
	// bound is turned into the minor units of every scale: at least 10.5 is at least 11 yen, at most
	// 10.5 at most 10 yen, and 1050 cents either way.
	for _, b := range []struct {
		v  int64
		op string
	}{{f.AmountMin, ">="}, {f.AmountMax, "<="}} {
		if b.v < 0 {
			continue
		}
		var alts []string
		for d := 0; d <= amountScale; d++ {
			unit := pow10(amountScale - d)
			minor := b.v / unit
			if b.op == ">=" && b.v%unit != 0 {
				minor++
			}
			c.args = append(c.args, minor)
			alts = append(alts, "(scale = "+strconv.Itoa(d)+" AND total_amount "+b.op+" $"+strconv.Itoa(len(c.args))+")")
		}
		c.where = append(c.where, "("+strings.Join(alts, " OR ")+")")
	}
	if !f.From.IsZero() {
		add("created_at >= ?", f.From.UnixMilli())
	}
	if !f.To.IsZero() {
		add("created_at < ?", f.To.UnixMilli())
	}
	return c
}

// List returns a page of the merchant's invoices, newest first, their pay keys left sealed (PayKey "").
func List(ctx context.Context, q store.Querier, merchantID string, f Filter) ([]Invoice, error) {
	c := f.where(merchantID)
	order := "DESC"
	if f.After > 0 {
		c.add("id < ?", f.After)
	} else if f.Before > 0 {
		c.add("id > ?", f.Before)
		order = "ASC"
	}
	c.args = append(c.args, f.Limit)
	rows, err := q.QueryContext(ctx, `SELECT `+columns+` FROM invoices WHERE `+c.sql()+` ORDER BY id `+order+
		` LIMIT $`+strconv.Itoa(len(c.args)), c.args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Invoice
	for rows.Next() {
		inv, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, inv)
	}
	if order == "ASC" {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, rows.Err()
}

// Sum is how many of a list's invoices are in one currency, and their total_amount summed.
type Sum struct {
	Currency money.Currency
	Count    int64
	Total    int64 // minor units
}

// Sums returns, per currency (by code), how many of the merchant's invoices f selects and the sum of
// their totals, by one aggregate in the database over the list's own condition and indexes (f's
// paging is ignored): the dashboard's totals of a list, which never loads the rows.
func Sums(ctx context.Context, q store.Querier, merchantID string, f Filter) ([]Sum, error) {
	stmt, args := sumsQuery(merchantID, f)
	rows, err := q.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Sum
	for rows.Next() {
		var s Sum
		if err := rows.Scan(&s.Currency.Code, &s.Currency.Digits, &s.Count, &s.Total); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// sumsQuery is Sums' statement. A sum stays within 64 bits for hundreds of thousands of invoices of
// the largest maximum amount a merchant may have (merchant.MaxOfMaxAmount).
func sumsQuery(merchantID string, f Filter) (string, []any) {
	c := f.where(merchantID)
	return `SELECT currency, scale, COUNT(*), CAST(SUM(total_amount) AS BIGINT) FROM invoices WHERE ` + c.sql() +
		` GROUP BY currency, scale ORDER BY currency`, c.args
}

// Service is the invoice service.
type Service struct {
	db        *store.DB
	merchants *merchant.Cache
	checkout  *checkout.Service
	pages     *hostedpage.Service
	ledger    *payment.Ledger
	vault     *vault.Service
	ring      *envelope.Keyring
	velocity  *velocity.Limiter
	proxies   httpapi.Proxies
	log       *slog.Logger
	publicURL string
	now       func() time.Time
}

// Config configures the invoice service.
type Config struct {
	DB        *store.DB
	Merchants *merchant.Cache
	// PublicURL is the base of the invoices' payment_url.
	PublicURL string
	Now       func() time.Time
	// Checkout holds the invoices' payment intents, and Pages the card form that pays them; Vault the
	// stored cards a vault customer's invoice may be charged on (pay.go).
	Checkout *checkout.Service
	Pages    *hostedpage.Service
	Vault    *vault.Service
	// Ledger says whether what the invoice's page shows moved, or would move, money (its "Test mode"
	// line, payment.Ledger.Test).
	Ledger *payment.Ledger
	// Keyring seals the invoices' pay keys and the e-mails that carry their links (required).
	Keyring *envelope.Keyring
	// Velocity limits the requests of the invoices' public links, per link and per client address,
	// whose address Proxies resolves (velocity.Limiter.PublicLink; required).
	Velocity *velocity.Limiter
	Proxies  httpapi.Proxies
	Logger   *slog.Logger
}

// New returns the invoice service, once it has sealed the pay keys an earlier version stored in clear
// (sealKeys).
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{db: cfg.DB, merchants: cfg.Merchants, checkout: cfg.Checkout, pages: cfg.Pages, ledger: cfg.Ledger, vault: cfg.Vault, ring: cfg.Keyring,
		velocity: cfg.Velocity, proxies: cfg.Proxies, log: cfg.Logger, publicURL: strings.TrimRight(cfg.PublicURL, "/"), now: cfg.Now}
	if err := s.sealKeys(ctx); err != nil {
		return nil, err
	}
	if s.checkout != nil {
		s.checkout.OnSucceeded(s.paid)
	}
	return s, nil
}

// Create makes an invoice of the merchant from b, a DRAFT; with send_email it is sent at once to its
// customer_email, in the same transaction.
func (s *Service) Create(ctx context.Context, m merchant.Merchant, b Body) (Invoice, error) {
	now := s.now().Truncate(time.Millisecond)
	inv := Invoice{LookupID: rand.Text()[:10], MerchantID: m.ID, Status: Draft, PayKey: rand.Text(), CreatedAt: now, UpdatedAt: now}
	inv.sealedKey = s.ring.Seal([]byte(inv.PayKey), keyAAD(inv.LookupID))
	if err := b.Apply(&inv, m, true); err != nil {
		return Invoice{}, err
	}
	if inv.Number == "" {
		inv.Number = "INV-" + inv.LookupID
	}
	send, _ := b.SendEmail.Flag("send_email")
	if send && inv.Customer.Email == "" && inv.Customer.LookupID == "" {
		return Invoice{}, fault.Invalid("customer_email", "customer_email is required to send the invoice (send_email)")
	}
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		if err := customerOf(ctx, tx, m.ID, &inv.Customer); err != nil {
			return err
		}
		if err := insert(ctx, tx, &inv); err != nil {
			return err
		}
		if err := s.record(ctx, tx, event.InvoiceCreated, inv, now); err != nil {
			return err
		}
		if send {
			if inv.Customer.Email == "" {
				return fault.Invalid("customer_email", "customer_email is required to send the invoice (send_email)")
			}
			if err := s.send(ctx, tx, m, &inv, SendRequest{To: inv.Customer.Email}); err != nil {
				return err
			}
		}
		return audit.Change(ctx, tx, m.ID, "invoice.create", "invoice/"+inv.LookupID, now)
	})
	if store.IsUniqueViolation(err) {
		return Invoice{}, numberTaken()
	}
	return inv, err
}

// editable reports why an invoice in status st cannot change, or nil: only a DRAFT or a SENT, unpaid
// invoice changes; an OVERDUE one may still be cancelled.
func editable(inv Invoice, cancelling bool) error {
	switch {
	case inv.Status == Draft || inv.Status == Sent:
		return nil
	case inv.Status == Overdue && cancelling:
		return nil
	}
	return fault.Conflict("invoice_not_editable", "Invoice %s is %s: only a DRAFT or SENT invoice can change.", inv.LookupID, inv.Status)
}

// Update changes the fields b sends of one of the merchant's invoices; status CANCELLED cancels it.
//
// A cancellation first cancels the invoice's live payment intent (stopPayment), so that no card form
// opened before can pay it; the invoice is then cancelled only if no page bound another meanwhile.
func (s *Service) Update(ctx context.Context, m merchant.Merchant, ref string, b Body) (Invoice, error) {
	cancel := false
	if b.Status.Set() {
		st, _ := b.Status.Str("status")
		if want, ok := ParseStatus(st); ok && want == Cancelled {
			cancel = true
		}
	}
	stopped := ""
	if cancel {
		inv, err := s.get(ctx, m.ID, ref)
		if err != nil {
			return Invoice{}, err
		}
		if err := editable(inv, true); err != nil {
			return Invoice{}, err
		}
		if stopped, err = s.stopPayment(ctx, m, inv); err != nil {
			return Invoice{}, err
		}
	}
	var inv Invoice
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if inv, err = s.Get(ctx, tx, m.ID, ref); err != nil {
			return err
		}
		if b.Status.Set() && !cancel {
			st, _ := b.Status.Str("status")
			if want, ok := ParseStatus(st); ok && want != inv.Status {
				return fault.Invalid("status", "status changes only to CANCELLED here: an invoice becomes SENT when sent, PAID when paid")
			}
		}
		if err := editable(inv, cancel); err != nil {
			return err
		}
		if cancel && inv.IntentID != stopped {
			return concurrentUpdate(inv) // a page bound a new intent after the old one was stopped
		}
		before := inv
		if err := b.Apply(&inv, m, false); err != nil {
			return err
		}
		if send, _ := b.SendEmail.Flag("send_email"); send {
			return fault.Invalid("send_email", "send_email is for create: send an existing invoice with POST /invoice-service/invoice/{id}/send")
		}
		if inv.Customer.LookupID != before.Customer.LookupID {
			if err := customerOf(ctx, tx, m.ID, &inv.Customer); err != nil {
				return err
			}
		}
		now := s.now().Truncate(time.Millisecond)
		if cancel {
			inv.Status = Cancelled
		}
		if inv.DueDate != before.DueDate || !slices.Equal(inv.ReminderDays, before.ReminderDays) {
			inv.RemindedUntil = passedOver(inv, now)
		}
		inv.UpdatedAt = now
		if err := save(ctx, tx, inv, m.Location()); err != nil {
			return err
		}
		action, typ := "invoice.update", event.InvoiceUpdated
		if cancel {
			action, typ = "invoice.cancel", event.InvoiceCanceled
		}
		if cancel || s.shown(before) != s.shown(inv) {
			// An update that leaves the invoice as the API shows it records no event: an event
			// reports a change.
			if err := s.record(ctx, tx, typ, inv, now); err != nil {
				return err
			}
		}
		return audit.Change(ctx, tx, m.ID, action, "invoice/"+inv.LookupID, now)
	})
	if store.IsUniqueViolation(err) {
		return Invoice{}, numberTaken()
	}
	return inv, err
}

// Remove deletes a DRAFT invoice of the merchant; any other is a 409 (cancel it instead).
func (s *Service) Remove(ctx context.Context, merchantID, ref string) (Invoice, error) {
	var inv Invoice
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if inv, err = read(ctx, tx, merchantID, ref); err != nil {
			return err
		}
		if inv.Status != Draft {
			return fault.Conflict("invoice_not_draft", "Invoice %s is %s: only a DRAFT can be deleted; cancel it instead (PUT with status CANCELLED).",
				inv.LookupID, inv.Status)
		}
		r, err := tx.ExecContext(ctx, `DELETE FROM invoices WHERE id = $1 AND version = $2`, inv.ID, inv.Version)
		if err := changedOne(r, err, inv); err != nil {
			return err
		}
		now := s.now()
		if err := s.record(ctx, tx, event.InvoiceDeleted, inv, now); err != nil { // as the API showed it last
			return err
		}
		return audit.Change(ctx, tx, merchantID, "invoice.delete", "invoice/"+inv.LookupID, now)
	})
	return inv, err
}

// list reads a page of invoices, their pay keys opened.
func (s *Service) list(ctx context.Context, merchantID string, f Filter) ([]Invoice, error) {
	var out []Invoice
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		out, err = List(ctx, q, merchantID, f)
		return err
	})
	for i := range out {
		if err == nil {
			err = s.open(&out[i])
		}
	}
	return out, err
}

// get reads one invoice, its pay key opened.
func (s *Service) get(ctx context.Context, merchantID, ref string) (Invoice, error) {
	var inv Invoice
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		inv, err = s.Get(ctx, q, merchantID, ref)
		return err
	})
	return inv, err
}
