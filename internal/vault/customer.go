package vault

import (
	"context"
	"crypto/rand"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/audit"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/field"
	"github.com/kassapay/kassa/internal/merchant"
	"github.com/kassapay/kassa/internal/plan"
	"github.com/kassapay/kassa/internal/store"
)

// Details are a customer's own fields (gateway-api.md, "Customer").
type Details struct {
	Email, FirstName, LastName, Company, BccEmails, Telephone         string
	Address1, Address2, City, Province, Country, PostalCode, CustomID string
}

// Customer is a merchant's customer with its stored cards.
type Customer struct {
	ID         int64
	LookupID   string
	MerchantID string
	Details
	Cards         []Card
	Subscriptions []Subscription
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// detailsBody is the body of customer create and update.
type detailsBody struct {
	Email      field.Value `json:"email"`
	FirstName  field.Value `json:"first_name"`
	LastName   field.Value `json:"last_name"`
	Company    field.Value `json:"company"`
	BccEmails  field.Value `json:"bcc_emails"`
	Telephone  field.Value `json:"telephone"`
	Address1   field.Value `json:"address1"`
	Address2   field.Value `json:"address2"`
	City       field.Value `json:"city"`
	Province   field.Value `json:"province"`
	Country    field.Value `json:"country"`
	PostalCode field.Value `json:"postal_code"`
	CustomID   field.Value `json:"custom_id"`
}

// detailFields lists the detail fields: name, bound, and where each lives in the body and in Details.
func detailFields(b *detailsBody, d *Details) []struct {
	name string
	max  int
	in   *field.Value
	out  *string
} {
	return []struct {
		name string
		max  int
		in   *field.Value
		out  *string
	}{
		{"email", 254, &b.Email, &d.Email}, {"first_name", 100, &b.FirstName, &d.FirstName},
		{"last_name", 100, &b.LastName, &d.LastName}, {"company", 200, &b.Company, &d.Company},
		{"bcc_emails", 1000, &b.BccEmails, &d.BccEmails}, {"telephone", 50, &b.Telephone, &d.Telephone},
		{"address1", 200, &b.Address1, &d.Address1}, {"address2", 200, &b.Address2, &d.Address2},
		{"city", 100, &b.City, &d.City}, {"province", 100, &b.Province, &d.Province},
		{"country", 100, &b.Country, &d.Country}, {"postal_code", 20, &b.PostalCode, &d.PostalCode},
		{"custom_id", 100, &b.CustomID, &d.CustomID},
	}
}

// apply validates the fields the body sends and writes them into d; absent fields keep their values
// ("PUT (partial update: absent fields keep their values)", wire-contract.md). email is required and
// must be an address; bcc_emails is a list of addresses separated by commas.
func (b *detailsBody) apply(d *Details) error {
	for _, f := range detailFields(b, d) {
		if !f.in.Set() {
			continue
		}
		v, err := f.in.Text(f.name, f.max)
		if err != nil {
			return err
		}
		*f.out = v
	}
	if d.Email == "" {
		return fault.Invalid("email", "email is required")
	}
	if err := merchant.ValidateEmail(d.Email); err != nil {
		return fault.Invalid("email", "email %s", err)
	}
	if d.BccEmails != "" {
		var list []string
		for _, e := range strings.FieldsFunc(d.BccEmails, func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
			if err := merchant.ValidateEmail(e); err != nil {
				return fault.Invalid("bcc_emails", "bcc_emails must be e-mail addresses separated by commas: %q %s", e, err)
			}
			list = append(list, e)
		}
		if len(list) > 10 {
			return fault.Invalid("bcc_emails", "bcc_emails may hold at most 10 addresses")
		}
		d.BccEmails = strings.Join(list, ",")
	}
	return nil
}

const customerColumns = `id, lookup_id, merchant_id, email, first_name, last_name, company, bcc_emails, telephone,
	address1, address2, city, province, country, postal_code, custom_id, created_at, updated_at`

func scanCustomer(s interface{ Scan(...any) error }) (Customer, error) {
	var c Customer
	var created, updated int64
	d := &c.Details
	err := s.Scan(&c.ID, &c.LookupID, &c.MerchantID, &d.Email, &d.FirstName, &d.LastName, &d.Company, &d.BccEmails,
		&d.Telephone, &d.Address1, &d.Address2, &d.City, &d.Province, &d.Country, &d.PostalCode, &d.CustomID, &created, &updated)
	c.CreatedAt, c.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return c, err
}

// newLookupID returns 10 random characters of [A-Z2-7]: 50 bits.
func newLookupID() string { return rand.Text()[:10] }

// createCustomer stores a new customer.
func (s *Service) createCustomer(ctx context.Context, merchantID string, d Details) (Customer, error) {
	now := s.now()
	c := Customer{LookupID: newLookupID(), MerchantID: merchantID, Details: d, CreatedAt: now, UpdatedAt: now}
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		if err := tx.QueryRowContext(ctx, `INSERT INTO customers (lookup_id, merchant_id, email, first_name, last_name, company,
			bcc_emails, telephone, address1, address2, city, province, country, postal_code, custom_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16) RETURNING id`,
			c.LookupID, merchantID, d.Email, d.FirstName, d.LastName, d.Company, d.BccEmails, d.Telephone, d.Address1,
			d.Address2, d.City, d.Province, d.Country, d.PostalCode, d.CustomID, now.UnixMilli()).Scan(&c.ID); err != nil {
			return err
		}
		if err := event.Record(ctx, tx, merchantID, event.CustomerCreated, c.wire(), now); err != nil {
			return err
		}
		return audit.Change(ctx, tx, merchantID, "customer.create", "customer/"+c.LookupID, now)
	})
	return c, err
}

// customer reads the merchant's customer with its cards; another merchant's is not found.
func (s *Service) customer(ctx context.Context, q store.Querier, merchantID, lookupID string) (Customer, error) {
	c, err := scanCustomer(q.QueryRowContext(ctx, `SELECT `+customerColumns+` FROM customers WHERE merchant_id = $1 AND lookup_id = $2`,
		merchantID, lookupID))
	if isNoRows(err) {
		return Customer{}, fault.NotFound("No customer %s.", lookupID)
	}
	if err != nil {
		return Customer{}, err
	}
	if c.Cards, err = cardsOf(ctx, q, []int64{c.ID}); err != nil {
		return Customer{}, err
	}
	c.Subscriptions, err = subscriptionsOf(ctx, q, []int64{c.ID})
	return c, err
}

// Get reads a customer of the merchant.
func (s *Service) Get(ctx context.Context, merchantID, lookupID string) (Customer, error) {
	var c Customer
	err := s.db.Read(ctx, func(q store.Querier) error {
		var err error
		c, err = s.customer(ctx, q, merchantID, lookupID)
		return err
	})
	return c, err
}

// updateCustomer applies a partial update.
func (s *Service) updateCustomer(ctx context.Context, merchantID, lookupID string, b *detailsBody) (Customer, error) {
	var c Customer
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		var err error
		if c, err = s.customer(ctx, tx, merchantID, lookupID); err != nil {
			return err
		}
		before := c.wire()
		if err := b.apply(&c.Details); err != nil {
			return err
		}
		c.UpdatedAt = s.now()
		d := c.Details
		_, err = tx.ExecContext(ctx, `UPDATE customers SET email = $2, first_name = $3, last_name = $4, company = $5,
			bcc_emails = $6, telephone = $7, address1 = $8, address2 = $9, city = $10, province = $11, country = $12,
			postal_code = $13, custom_id = $14, updated_at = $15 WHERE id = $1`,
			c.ID, d.Email, d.FirstName, d.LastName, d.Company, d.BccEmails, d.Telephone, d.Address1, d.Address2, d.City,
			d.Province, d.Country, d.PostalCode, d.CustomID, c.UpdatedAt.UnixMilli())
		if err != nil {
			return err
		}
		// An update that leaves the customer as the API shows it reports nothing.
		if after := c.wire(); !reflect.DeepEqual(after, before) {
			if err := event.Record(ctx, tx, merchantID, event.CustomerUpdated, after, c.UpdatedAt); err != nil {
				return err
			}
		}
		return audit.Change(ctx, tx, merchantID, "customer.update", "customer/"+lookupID, c.UpdatedAt)
	})
	return c, err
}

// deleteCustomer removes a customer and its cards.
func (s *Service) deleteCustomer(ctx context.Context, merchantID, lookupID string) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		c, err := s.lockCustomer(ctx, tx, merchantID, lookupID)
		if err != nil {
			return err
		}
		for _, sub := range c.Subscriptions {
			if !sub.Final() {
				return fault.Conflict("customer_subscribed", "Customer %s has a current subscription (%s); cancel it before deleting the customer.",
					lookupID, sub.LookupID)
			}
		}
		// Ended subscriptions go with the customer (ON DELETE CASCADE); so do the cards.
		if _, err := tx.ExecContext(ctx, `DELETE FROM subscriptions WHERE customer_id = $1`, c.ID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM stored_cards WHERE customer_id = $1`, c.ID); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, `DELETE FROM customers WHERE id = $1`, c.ID); err != nil {
			return err
		}
		// The customer as it was, cards and ended subscriptions included: they go with it, without
		// events of their own.
		if err := event.Record(ctx, tx, merchantID, event.CustomerDeleted, c.wire(), s.now()); err != nil {
			return err
		}
		return audit.Change(ctx, tx, merchantID, "customer.delete", "customer/"+lookupID, s.now())
	})
}

// CustomerFilter selects customers of a merchant.
type CustomerFilter struct {
	Limit                               int
	Before, After                       int64
	Email, FirstName, LastName, Company string // case-insensitive exact match
	WithSubscription                    *bool  // with (or without) a current subscription
	PlanID                              int64  // with a current subscription to this plan

	// The dashboard's search: by name, e-mail or a card's last 4 digits.
	Name       string // a first or a last name, or "first last": case-insensitive, whole words
	CardSuffix string // the last four digits of one of the customer's stored cards
}

// customerQuery is the query of a page of customers that f selects, newest first (oldest first when
// it pages backwards, asc), and its arguments. An e-mail is found on customers_email and a card's last
// four digits on stored_cards_suffix (migration 29).
func customerQuery(merchantID string, f CustomerFilter) (q string, args []any, asc bool) {
	where := []string{"merchant_id = $1"}
	args = []any{merchantID}
	add := func(cond string, v ...any) {
		for _, v := range v {
			args = append(args, v)
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1)
		}
		where = append(where, cond)
	}
	if f.After > 0 {
		add("id < ?", f.After)
	}
	if f.Before > 0 {
		add("id > ?", f.Before)
	}
	for _, m := range []struct{ col, v string }{{"email", f.Email}, {"first_name", f.FirstName}, {"last_name", f.LastName}, {"company", f.Company}} {
		if m.v != "" {
			add("LOWER("+m.col+") = ?", strings.ToLower(m.v))
		}
	}
	if words := strings.Fields(strings.ToLower(f.Name)); len(words) == 1 {
		add("(LOWER(first_name) = ? OR LOWER(last_name) = ?)", words[0], words[0])
	} else if len(words) > 1 {
		add("LOWER(first_name) = ? AND LOWER(last_name) = ?", words[0], strings.Join(words[1:], " "))
	}
	if f.CardSuffix != "" {
		add("id IN (SELECT customer_id FROM stored_cards WHERE card_suffix = ?)", f.CardSuffix)
	}
	current := `EXISTS (SELECT 1 FROM subscriptions s WHERE s.customer_id = customers.id AND s.status IN ` + plan.CurrentStatusesSQL
	if f.WithSubscription != nil && *f.WithSubscription {
		where = append(where, current+")")
	} else if f.WithSubscription != nil {
		where = append(where, "NOT "+current+")")
	}
	if f.PlanID != 0 {
		add(current+" AND s.plan_id = ?)", f.PlanID)
	}
	order := "DESC"
	if asc = f.Before > 0 && f.After == 0; asc {
		order = "ASC"
	}
	args = append(args, f.Limit)
	return `SELECT ` + customerColumns + ` FROM customers WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY id ` + order + ` LIMIT $` + strconv.Itoa(len(args)), args, asc
}

// listCustomers returns a page of the merchant's customers, newest first, with their cards.
func (s *Service) listCustomers(ctx context.Context, merchantID string, f CustomerFilter) ([]Customer, error) {
	q, args, asc := customerQuery(merchantID, f)
	var out []Customer
	err := s.db.Read(ctx, func(sq store.Querier) error {
		rows, err := sq.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			c, err := scanCustomer(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		ids := make([]int64, len(out))
		for i, c := range out {
			ids[i] = c.ID
		}
		cards, err := cardsOf(ctx, sq, ids)
		if err != nil {
			return err
		}
		subs, err := subscriptionsOf(ctx, sq, ids)
		if err != nil {
			return err
		}
		for i := range out {
			for _, cd := range cards {
				if cd.CustomerID == out[i].ID {
					out[i].Cards = append(out[i].Cards, cd)
				}
			}
			for _, sub := range subs {
				if sub.CustomerID == out[i].ID {
					out[i].Subscriptions = append(out[i].Subscriptions, sub)
				}
			}
		}
		return nil
	})
	if asc {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, err
}
