package billing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

func TestPlanService(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, time.Date(2027, time.January, 1, 0, 0, 0, 0, time.UTC), billing.Config{})
		r := f.must(t, "POST", "/plan-service/plan/", map[string]any{"name": "Gold", "amount": 49.99, "currency": "CAD",
			"frequency": "yearly", "number_of_payments": 5, "send_receipt": "true"})
		if r.Str("frequency") != "ANNUALLY" || r.Num("amount") != "49.99" || r.Str("currency") != "CAD" || r.Num("number_of_payments") != "5" ||
			!r.Bool("send_receipt") || r.Num("total_subscriptions") != "0" || r.Num("current_subscriptions") != "0" || len(r.Str("lookup_id")) != 10 {
			t.Fatalf("create: %s", r.Raw)
		}
		gold := r.Str("lookup_id")
		if g := f.must(t, "GET", "/plan-service/plan/"+gold+"/", nil); string(g.Raw) != string(r.Raw) {
			t.Fatalf("get: %s", g.Raw)
		}
		u := f.must(t, "PUT", "/plan-service/plan/"+gold, map[string]any{"amount": "59.99", "frequency": "MOTHLY"})
		if u.Num("amount") != "59.99" || u.Str("frequency") != "MONTHLY" || u.Str("name") != "Gold" {
			t.Fatalf("update: %s", u.Raw)
		}
		f.must(t, "POST", "/plan-service/plan", map[string]any{"name": "Silver", "amount": "9", "frequency": "WEEKLY"})
		for _, tc := range []struct {
			body   map[string]any
			status int
			field  string
		}{
			{map[string]any{"amount": "1", "frequency": "DAILY"}, 400, "name"},
			{map[string]any{"name": "x", "frequency": "DAILY"}, 400, "amount"},
			{map[string]any{"name": "x", "amount": "0", "frequency": "DAILY"}, 400, "amount"},
			{map[string]any{"name": "x", "amount": "1.001", "frequency": "DAILY"}, 400, "amount"},
			{map[string]any{"name": "x", "amount": "1", "frequency": "HOURLY"}, 400, "frequency"},
			{map[string]any{"name": "x", "amount": "1"}, 400, "frequency"},
			{map[string]any{"name": "x", "amount": "1", "frequency": "DAILY", "currency": "EUR"}, 400, "currency"},
			{map[string]any{"name": "x", "amount": "1", "frequency": "DAILY", "number_of_payments": -1}, 400, "number_of_payments"},
			{map[string]any{"name": "x", "amount": "1", "frequency": "DAILY", "send_receipt": "maybe"}, 400, "send_receipt"},
			{map[string]any{"name": "SILVER", "amount": "1", "frequency": "DAILY"}, 409, ""},
		} {
			if r := f.do(t, "POST", "/plan-service/plan", tc.body); r.Status != tc.status || r.Str("field") != tc.field {
				t.Errorf("create %v: %d %s; want %d naming %q", tc.body, r.Status, r.Raw, tc.status, tc.field)
			}
		}
		list := f.must(t, "GET", "/plan-service/plan?limit=1", nil)
		if es := list.Body["entities"].([]any); len(es) != 1 || es[0].(map[string]any)["name"] != "Silver" {
			t.Fatalf("list: %s", list.Raw)
		}

		// A plan with a current subscription cannot be deleted; it counts it.
		c, _ := f.customer(t, cardtest.Visa)
		s := f.subscribe(t, c, map[string]any{"plan_lookup_id": gold})
		if r := f.must(t, "GET", "/plan-service/plan/"+gold, nil); r.Num("total_subscriptions") != "1" || r.Num("current_subscriptions") != "1" {
			t.Fatalf("counts: %s", r.Raw)
		}
		if r := f.do(t, "DELETE", "/plan-service/plan/"+gold, nil); r.Status != 409 || r.Str("error") != "plan_in_use" {
			t.Fatalf("delete with a current subscription: %d %s", r.Status, r.Raw)
		}
		f.must(t, "PATCH", "/customer-service/customer/"+c+"/subscription/"+s, map[string]any{"status": "CANCELLED"})
		if r := f.must(t, "GET", "/plan-service/plan/"+gold, nil); r.Num("total_subscriptions") != "1" || r.Num("current_subscriptions") != "0" {
			t.Fatalf("counts after cancel: %s", r.Raw)
		}
		f.must(t, "DELETE", "/plan-service/plan/"+gold, nil)
		var ops []string
		rows, err := db.Reader().QueryContext(context.Background(), `SELECT operation FROM audit_log WHERE resource = $1 ORDER BY id`, "plan/"+gold)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var op string
			rows.Scan(&op)
			ops = append(ops, op)
		}
		rows.Close()
		if strings.Join(ops, " ") != "plan.create plan.update plan.delete" {
			t.Fatalf("audit of the plan: %v", ops)
		}
		if r := f.do(t, "GET", "/plan-service/plan/"+gold, nil); r.Status != 404 {
			t.Fatalf("get a deleted plan: %d", r.Status)
		}
		// The canceled subscription still names its plan.
		if r := f.sub(t, c, s); r.Str("name") != "Gold" || r.Str("status") != "CANCELED" {
			t.Fatalf("subscription of a deleted plan: %s", r.Raw)
		}
		// Another merchant sees none of it.
		other := f.srv.NewMerchant(t)
		if r := other.Do(t, "GET", "/plan-service/plan/"+gold, nil); r.Status != 404 {
			t.Fatalf("another merchant: %d", r.Status)
		}
	})
}

func TestSubscriptionAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		now := time.Date(2027, time.March, 10, 12, 0, 0, 0, time.UTC)
		f := newFixture(t, db, now, billing.Config{})
		p := f.plan(t, map[string]any{"name": "Monthly", "amount": "20.00", "frequency": "MONTHLY", "number_of_payments": 6})
		c, card := f.customer(t, cardtest.Visa)
		other, otherCard := f.customer(t, cardtest.Mastercard)

		r := f.must(t, "POST", "/customer-service/customer/"+c+"/subscription", map[string]any{"plan_lookup_id": p, "card_lookup_id": card,
			"description": "Monthly box"})
		subs := r.Body["subscriptions"].([]any)
		if r.Str("lookup_id") != c || len(subs) != 1 {
			t.Fatalf("create returns the customer: %s", r.Raw)
		}
		sub := subs[0].(map[string]any)
		want := map[string]any{"plan_lookup_id": p, "card_lookup_id": card, "name": "Monthly", "status": "ACTIVE", "currency": "CAD",
			"frequency": "MONTHLY", "email": "ada@example.com", "description": "Monthly box"}
		for k, v := range want {
			if sub[k] != v {
				t.Errorf("%s = %v, want %v", k, sub[k], v)
			}
		}
		s := sub["lookup_id"].(string)
		g := f.sub(t, c, s)
		if g.Num("amount") != "20.00" || num(g, "start_date") != now.UnixMilli() || num(g, "next_run") != now.UnixMilli() ||
			num(g, "total_cycles") != 6 || num(g, "remaining_cycles") != 6 || num(g, "completed_cycles") != 0 || num(g, "last_run") != -1 {
			t.Fatalf("get: %s", g.Raw)
		}
		// Amount may differ from the plan; a start within the past hour counts as now; a future one stands.
		r = f.must(t, "POST", "/customer-service/customer/"+c+"/subscription", map[string]any{"plan_lookup_id": p, "amount": 7,
			"start_date": now.Add(-30 * time.Minute).UnixMilli(), "email": "other@example.com"})
		late := r.Body["subscriptions"].([]any)[1].(map[string]any)
		if late["amount"].(interface{ String() string }).String() != "7.00" || late["email"] != "other@example.com" {
			t.Fatalf("second subscription: %v", late)
		}
		if n, _ := late["start_date"].(interface{ Int64() (int64, error) }).Int64(); n != now.UnixMilli() {
			t.Fatalf("start half an hour ago: %d, want now", n)
		}
		future := now.Add(72 * time.Hour)
		r = f.must(t, "POST", "/customer-service/customer/"+c+"/subscription", map[string]any{"plan_lookup_id": p, "start_date": future.UnixMilli()})
		if n, _ := r.Body["subscriptions"].([]any)[2].(map[string]any)["next_run"].(interface{ Int64() (int64, error) }).Int64(); n != future.UnixMilli() {
			t.Fatalf("future start: next_run %d", n)
		}
		for _, tc := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{}, "plan_lookup_id"},
			{map[string]any{"plan_lookup_id": "NOSUCHPLAN"}, "plan_lookup_id"},
			{map[string]any{"plan_lookup_id": p, "card_lookup_id": otherCard}, "card_lookup_id"},
			{map[string]any{"plan_lookup_id": p, "start_date": now.Add(-2 * time.Hour).UnixMilli()}, "start_date"},
			{map[string]any{"plan_lookup_id": p, "start_date": "tomorrow"}, "start_date"},
			{map[string]any{"plan_lookup_id": p, "amount": "-1"}, "amount"},
			{map[string]any{"plan_lookup_id": p, "amount": "0"}, "amount"},
			{map[string]any{"plan_lookup_id": p, "email": "nope"}, "email"},
			{map[string]any{"plan_lookup_id": p, "description": strings.Repeat("x", 501)}, "description"},
		} {
			if r := f.do(t, "POST", "/customer-service/customer/"+c+"/subscription", tc.body); r.Status != 400 || r.Str("field") != tc.field {
				t.Errorf("subscribe %v: %d %s; want 400 naming %s", tc.body, r.Status, r.Raw, tc.field)
			}
		}

		// PATCH: changes, legal transitions, final states.
		path := "/customer-service/customer/" + c + "/subscription/" + s
		if r := f.must(t, "PATCH", path, map[string]any{"amount": "25.00", "email": "new@example.com", "description": "Bigger box"}); r.Num("amount") != "25.00" ||
			r.Str("email") != "new@example.com" || r.Str("description") != "Bigger box" {
			t.Fatalf("patch: %s", r.Raw)
		}
		for _, bad := range []map[string]any{{"status": "EXPIRED"}, {"status": "RETRY"}, {"status": "later"}, {"card_lookup_id": otherCard}} {
			if r := f.do(t, "PATCH", path, bad); r.Status != 400 {
				t.Errorf("patch %v: %d %s", bad, r.Status, r.Raw)
			}
		}
		if r := f.must(t, "PATCH", path, map[string]any{"status": "PAUSED"}); r.Str("status") != "PAUSED" {
			t.Fatalf("pause: %s", r.Raw)
		}
		if r := f.must(t, "PATCH", path, map[string]any{"status": "CANCELED"}); r.Str("status") != "CANCELED" || num(r, "next_run") != -1 {
			t.Fatalf("cancel: %s", r.Raw)
		}
		for _, body := range []map[string]any{{"status": "ACTIVE"}, {"description": "x"}} {
			if r := f.do(t, "PATCH", path, body); r.Status != 409 || r.Str("error") != "subscription_final" {
				t.Errorf("patch %v of a canceled subscription: %d %s", body, r.Status, r.Raw)
			}
		}
		if r := f.do(t, "GET", "/customer-service/customer/"+other+"/subscription/"+s, nil); r.Status != 404 {
			t.Fatalf("the subscription under another customer: %d", r.Status)
		}
	})
}

// The vault's rules that involve subscriptions: a customer or card with a current subscription
// cannot be deleted; the customers of a plan; the with_subscription filter.
func TestSubscriptionsInTheVault(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		f := newFixture(t, db, time.Date(2027, time.April, 1, 0, 0, 0, 0, time.UTC), billing.Config{})
		p := f.plan(t, map[string]any{"name": "Weekly", "amount": "4.00", "frequency": "WEEKLY"})
		q := f.plan(t, map[string]any{"name": "Daily", "amount": "1.00", "frequency": "DAILY"})
		subscribed, card := f.customer(t, cardtest.Visa)
		_, spare := f.customerCard(t, subscribed, cardtest.Amex)
		other, _ := f.customer(t, cardtest.Mastercard)
		plain := f.must(t, "POST", "/customer-service/customer", map[string]any{"email": "plain@example.com"}).Str("lookup_id")
		s := f.subscribe(t, subscribed, map[string]any{"plan_lookup_id": p, "card_lookup_id": card})
		f.subscribe(t, other, map[string]any{"plan_lookup_id": q})

		if r := f.do(t, "DELETE", "/customer-service/customer/"+subscribed, nil); r.Status != 409 || r.Str("error") != "customer_subscribed" {
			t.Fatalf("delete a subscribed customer: %d %s", r.Status, r.Raw)
		}
		if r := f.do(t, "DELETE", "/customer-service/customer/"+subscribed+"/card/"+card, nil); r.Status != 409 || r.Str("error") != "card_in_use" {
			t.Fatalf("delete the subscription's card: %d %s", r.Status, r.Raw)
		}
		f.must(t, "DELETE", "/customer-service/customer/"+subscribed+"/card/"+spare, nil)

		ids := func(path string) string {
			var out []string
			for _, e := range f.must(t, "GET", path, nil).Body["entities"].([]any) {
				out = append(out, e.(map[string]any)["lookup_id"].(string))
			}
			return strings.Join(out, ",")
		}
		if got := ids("/customer-service/customer/plan/" + p); got != subscribed {
			t.Errorf("customers of the weekly plan: %s", got)
		}
		if got := ids("/customer-service/customer?with_subscription=true"); got != other+","+subscribed {
			t.Errorf("with_subscription=true: %s", got)
		}
		if got := ids("/customer-service/customer?with_subscription=false"); got != plain {
			t.Errorf("with_subscription=false: %s", got)
		}
		if r := f.do(t, "GET", "/customer-service/customer?with_subscription=maybe", nil); r.Status != 400 || r.Str("field") != "with_subscription" {
			t.Errorf("with_subscription=maybe: %d", r.Status)
		}
		if r := f.do(t, "GET", "/customer-service/customer/plan/NOSUCHPLAN", nil); r.Status != 404 {
			t.Errorf("customers of an unknown plan: %d", r.Status)
		}

		// Once canceled, the customer can go, with its cards and ended subscriptions.
		f.must(t, "PATCH", "/customer-service/customer/"+subscribed+"/subscription/"+s, map[string]any{"status": "CANCELED"})
		f.must(t, "DELETE", "/customer-service/customer/"+subscribed, nil)
		if got := ids("/customer-service/customer/plan/" + p); got != "" {
			t.Errorf("customers of the plan after the delete: %s", got)
		}
	})
}
