package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/billing/billingtest"
	"github.com/kassapay/kassa/internal/store"
	"github.com/kassapay/kassa/internal/store/storetest"
)

// Every delivery verifies with the Standard Webhooks Go library under the endpoint's secret, and not
// under another secret nor with its body changed by one byte; the body is {"type", "timestamp",
// "data"} from the event's row, and webhook-id is the event's id.
func TestDeliveriesVerifyWithTheGoLibrary(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		rc := newReceiver(t, nil)
		f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc)})
		m := f.merchant(t, "verify@example.com")
		_, secret := f.endpoint(t, m, rc.srv.URL+"/hooks")
		ids := f.record(t, m, 3)
		f.drive(t)
		got := rc.requests()
		if len(got) != 3 {
			t.Fatalf("%d requests, want 3", len(got))
		}
		index := map[string]int{}
		for i, id := range ids {
			index[id] = i
		}
		for _, r := range got { // sent at once, so in any order
			i, ok := index[r.Header.Get("webhook-id")]
			if !ok {
				t.Fatalf("webhook-id %q is none of the events %v", r.Header.Get("webhook-id"), ids)
			}
			delete(index, r.Header.Get("webhook-id"))
			if err := verify(secret, r); err != nil {
				t.Errorf("delivery %d does not verify: %v", i, err)
			}
			if verify(NewSecret(), r) == nil {
				t.Errorf("delivery %d verifies under another secret", i)
			}
			changed := r
			changed.Body = strings.Replace(r.Body, "Zo", "Zp", 1)
			if verify(secret, changed) == nil {
				t.Errorf("delivery %d verifies with a byte of its body changed", i)
			}
			if r.Header.Get("Content-Type") != "application/json" ||
				!strings.HasPrefix(r.Header.Get("User-Agent"), "Kassa") {
				t.Errorf("delivery %d headers: %v", i, r.Header)
			}
			want := fmt.Sprintf(`{"type":"customer.created","timestamp":%q,"data":{"id":"cus_%d","name":"Zoë"}}`,
				f.clock.Now().UTC().Format(time.RFC3339Nano), i)
			if r.Body != want {
				t.Errorf("delivery %d body\n%s\nwant\n%s", i, r.Body, want)
			}
			if d := f.delivery(t, ids[i]); d.status != "SUCCEEDED" || d.attempts != 1 {
				t.Errorf("delivery %d: %+v", i, d)
			}
			if a := f.attempts(t, ids[i]); len(a) != 1 || a[0].status != 200 || a[0].response != "ok" || a[0].err != "" {
				t.Errorf("delivery %d attempts: %+v", i, a)
			}
		}
	})
}

// A failing delivery is tried again on the schedule, each retry within ±10 % of its delay after the
// attempt before, and after the tenth attempt it is FAILED. The answer's first KiB is kept.
func TestRetrySchedule(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("x" + strings.Repeat("é", 1000))) // 2,001 bytes: 1 KiB ends inside a character
		})
		f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc)})
		m := f.merchant(t, "retry@example.com")
		f.endpoint(t, m, rc.srv.URL)
		id := f.record(t, m, 1)[0]
		f.drive(t)
		for n := 1; n < len(Schedule); n++ {
			d := f.delivery(t, id)
			last := f.attempts(t, id)
			if d.status != "PENDING" || d.attempts != n || len(last) != n {
				t.Fatalf("after attempt %d: %+v, %d attempts recorded", n, d, len(last))
			}
			if delay := d.nextAttempt.Sub(last[n-1].at); delay < Schedule[n]*9/10 || delay > Schedule[n]*11/10 {
				t.Fatalf("retry %d due %v after the attempt before, want %v ± 10 %%", n, delay, Schedule[n])
			}
			// Just before it is due nothing is sent; when it is due, it is.
			f.clock.Advance(d.nextAttempt.Sub(f.clock.Now()) - time.Millisecond)
			f.drive(t)
			if len(rc.requests()) != n {
				t.Fatalf("retry %d sent before it was due", n)
			}
			f.clock.Advance(time.Millisecond)
			f.drive(t)
			if len(rc.requests()) != n+1 {
				t.Fatalf("retry %d not sent when due", n)
			}
		}
		d := f.delivery(t, id)
		if d.status != "FAILED" || d.attempts != 10 {
			t.Fatalf("after the schedule: %+v", d)
		}
		a := f.attempts(t, id)
		if a[9].status != 500 || a[9].response != "x"+strings.Repeat("é", 511) {
			t.Fatalf("last attempt: %d, %d bytes of answer", a[9].status, len(a[9].response))
		}
		f.clock.Advance(48 * time.Hour)
		f.drive(t)
		if len(rc.requests()) != 10 {
			t.Fatalf("%d requests, want 10", len(rc.requests()))
		}
		// The requests carried the same webhook-id, and each its own timestamp.
		for i, r := range rc.requests() {
			if r.Header.Get("webhook-id") != id || r.Header.Get("webhook-timestamp") != fmt.Sprint(a[i].at.Unix()) {
				t.Fatalf("request %d: id %s, timestamp %s", i, r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp"))
			}
		}
	})
}

// A 410 ends the delivery and disables the endpoint, saying why; the endpoint's other deliveries are
// not sent, and events after it queue none.
func TestGoneDisablesTheEndpoint(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
		f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc), Workers: 1})
		m := f.merchant(t, "gone@example.com")
		endpoint, _ := f.endpoint(t, m, rc.srv.URL)
		ids := f.record(t, m, 3)
		f.drive(t)
		if n := len(rc.requests()); n != 1 {
			t.Fatalf("%d requests, want 1 (the endpoint is disabled after the first)", n)
		}
		if d := f.delivery(t, ids[0]); d.status != "FAILED" || d.attempts != 1 {
			t.Fatalf("the delivery answered 410: %+v", d)
		}
		var reason string
		var disabled bool
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT disabled, disabled_reason FROM webhook_endpoints WHERE id = $1`, endpoint).
			Scan(&disabled, &reason); err != nil {
			t.Fatal(err)
		}
		if !disabled || !strings.Contains(reason, "410") {
			t.Fatalf("endpoint disabled %v, reason %q", disabled, reason)
		}
		f.clock.Advance(time.Hour)
		f.record(t, m, 1)
		f.drive(t)
		if n := len(rc.requests()); n != 1 {
			t.Fatalf("%d requests to a disabled endpoint", n-1)
		}
		if n := f.count(t, `SELECT (SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = $1)
			+ (SELECT COUNT(*) FROM webhook_queue WHERE endpoint_id = $1)`, endpoint); n != 3 {
			t.Fatalf("%d deliveries to the disabled endpoint, made or queued, want the 3 queued before", n)
		}
	})
}

// Retry-After on a 429, 502, 503 or 504, in seconds or as an HTTP date, puts the next attempt no
// sooner than it asks, at most 24 hours away; on another status it is not a reason to wait.
func TestRetryAfter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		var status int
		var header string
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", header)
			w.WriteHeader(status)
		})
		f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc)})
		m := f.merchant(t, "later@example.com")
		f.endpoint(t, m, rc.srv.URL)
		for _, c := range []struct {
			status int
			header func(now time.Time) string
			want   time.Duration // the least delay; the schedule's 5 s ± 10 % when the header is not honoured
		}{
			{http.StatusTooManyRequests, func(time.Time) string { return "120" }, 120 * time.Second},
			{http.StatusServiceUnavailable, func(now time.Time) string { return now.Add(time.Hour + time.Second).UTC().Format(http.TimeFormat) }, time.Hour},
			{http.StatusBadGateway, func(time.Time) string { return "9999999" }, MaxRetryAfter},
			{http.StatusGatewayTimeout, func(time.Time) string { return "30" }, 30 * time.Second},
			{http.StatusInternalServerError, func(time.Time) string { return "3600" }, 0},
		} {
			status, header = c.status, c.header(f.clock.Now())
			id := f.record(t, m, 1)[0]
			f.drive(t)
			delay := f.delivery(t, id).nextAttempt.Sub(f.attempts(t, id)[0].at)
			if c.want == 0 && (delay < 4500*time.Millisecond || delay > 5500*time.Millisecond) ||
				c.want > 0 && (delay < c.want || delay > c.want+time.Second) {
				t.Errorf("%d with Retry-After %s: next attempt after %v, want %v", c.status, header, delay, c.want)
			}
			db.Exec(context.Background(), `UPDATE webhook_deliveries SET status = 'FAILED'`)
		}
	})
}

// A rotated-out secret signs beside the new one until previous_until: both signatures verify with the
// library, then only the new one.
func TestSecretRotation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		rc := newReceiver(t, nil)
		f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc)})
		m := f.merchant(t, "rotate@example.com")
		endpoint, old := f.endpoint(t, m, rc.srv.URL)
		var endpointID string
		if err := db.Reader().QueryRowContext(context.Background(), `SELECT endpoint_id FROM webhook_endpoints WHERE id = $1`, endpoint).Scan(&endpointID); err != nil {
			t.Fatal(err)
		}
		cur := NewSecret()
		if _, err := db.Exec(context.Background(), `UPDATE webhook_endpoints SET secret = $2, previous_secret = $3, previous_until = $4 WHERE id = $1`,
			endpoint, sealSecret(f.ring, endpointID, cur), sealSecret(f.ring, endpointID, old), f.clock.Now().Add(24*time.Hour).UnixMilli()); err != nil {
			t.Fatal(err)
		}
		f.record(t, m, 1)
		f.drive(t)
		during := rc.requests()[0]
		if n := len(strings.Fields(during.Header.Get("webhook-signature"))); n != 2 {
			t.Fatalf("%d signatures during the rotation, want 2", n)
		}
		for name, s := range map[string]string{"new": cur, "old": old} {
			if err := verify(s, during); err != nil {
				t.Errorf("the %s secret does not verify during the rotation: %v", name, err)
			}
		}
		f.clock.Advance(24 * time.Hour)
		f.record(t, m, 1)
		f.drive(t)
		after := rc.requests()[1]
		if n := len(strings.Fields(after.Header.Get("webhook-signature"))); n != 1 {
			t.Fatalf("%d signatures after the rotation, want 1", n)
		}
		// The clock was moved a day ahead of the library's: it checks the signature, not the age.
		if err := verifyIgnoringTimestamp(cur, after); err != nil {
			t.Errorf("the new secret does not verify after the rotation: %v", err)
		}
		if verifyIgnoringTimestamp(old, after) == nil {
			t.Error("the old secret still verifies after the rotation")
		}
	})
}

// An endpoint whose every delivery has failed for 5 days is disabled, and its merchant e-mailed
// through the outbox, once; a success in between starts the 5 days again.
func TestFiveDaysOfFailuresDisable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ok := false
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
			if !ok {
				w.WriteHeader(http.StatusInternalServerError)
			}
		})
		f := newFixture(t, db, Config{AllowPrivate: true, RootCAs: roots(rc)})
		m := f.merchant(t, "owner@example.com")
		endpoint, _ := f.endpoint(t, m, rc.srv.URL)
		disabled := func() bool {
			return f.count(t, `SELECT COUNT(*) FROM webhook_endpoints WHERE id = $1 AND disabled = TRUE`, endpoint) == 1
		}
		// An event every 6 hours, and the deliverer every hour. Two days of failures, then one success.
		hours := func(n int) {
			for h := range n {
				if h%6 == 0 {
					f.record(t, m, 1)
				}
				f.drive(t)
				f.clock.Advance(time.Hour)
			}
		}
		hours(48)
		ok = true
		f.record(t, m, 1)
		f.drive(t)
		ok = false
		if f.count(t, `SELECT COUNT(*) FROM webhook_endpoints WHERE id = $1 AND failing_since IS NULL`, endpoint) != 1 {
			t.Fatal("failing_since not cleared by a success")
		}
		hours(5*24 - 2)
		if disabled() {
			t.Fatal("disabled before 5 days of failures")
		}
		hours(4)
		if !disabled() {
			t.Fatal("not disabled after 5 days of failures")
		}
		hours(24)
		mails := billingtest.Outbox(t, db)
		if len(mails) != 1 || mails[0].MerchantID != m || mails[0].To != "owner@example.com" || !strings.Contains(mails[0].Subject, rc.srv.URL) {
			t.Fatalf("the e-mails of the outbox: %+v", mails)
		}
	})
}

// The body is built from the event's row alone: the same row gives the same bytes.
func TestBodyIsDeterministic(t *testing.T) {
	at := time.UnixMilli(1_764_151_200_123)
	data := `{"b":1,"a":[2,3]}`
	b := Body("transaction.approved", at, data)
	if string(b) != string(Body("transaction.approved", at, data)) {
		t.Fatal("two bodies of one event differ")
	}
	var v struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Type != "transaction.approved" || !v.Timestamp.Equal(at) || string(v.Data) != data {
		t.Fatalf("body %s: %+v, %v", b, v, err)
	}
}
