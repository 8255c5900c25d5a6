package webhook

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kassapay/kassa/internal/checkout"
	"github.com/kassapay/kassa/internal/event"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/store"
)

// The delivery log: each attempt's time, status, latency and the first 1 KiB of the answer, readable
// through the API (GET /v1/webhook-endpoints/{id}/deliveries) and the dashboard, with a resend
// action. The delivery engine writes webhook_deliveries and webhook_attempts; this file only reads
// them, and queues a resend.

// Delivery statuses, as the delivery engine writes them.
const (
	StatusPending   = "PENDING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
)

// Delivery is one event sent, or to send, to one endpoint, with its attempts.
type Delivery struct {
	ID          int64 // the row's id; DeliveryID(ID) is how the API names it
	EventID     string
	EventType   string
	Status      string // StatusPending, StatusSucceeded or StatusFailed
	Attempts    []Attempt
	AttemptN    int       // how many attempts were made
	NextAttempt time.Time // when a pending delivery is tried next
	CreatedAt   time.Time
	// Body is the first RequestBodyLimit bytes of what every attempt sends (Body, from the event).
	Body string

	ref derivedRef // the row of a derived event (ledger.go); zero for a row of events
}

// Attempt is one try at a delivery.
type Attempt struct {
	At         time.Time
	StatusCode int // the HTTP status of the answer; 0 when there was none
	LatencyMS  int64
	Response   string // the first 1 KiB of the answer
	// ResponseHeaders are the answer's headers, "Name: value" lines, the first 1 KiB; "" without an
	// answer, and for attempts recorded before they were kept.
	ResponseHeaders string
	// Signature is the webhook-signature header sent; "" for attempts recorded before it was kept.
	Signature string
	// Error is why there was no answer, or it was not read: "" or one of a few phrases ("target not
	// allowed", "could not connect", …), never the error itself (shownError).
	Error string
}

// RequestBodyLimit bounds the request body the delivery log shows: the first 4 KiB.
const RequestBodyLimit = 4096

// Header is one header of a request, as the delivery log shows it.
type Header struct{ Name, Value string }

// RequestHeaders are the headers attempt a of d was sent with, as send set them: all but the
// signature follow from the event and the attempt's time (webhook-timestamp is its second).
func (d Delivery) RequestHeaders(a Attempt) []Header {
	sig := a.Signature
	if sig == "" {
		sig = "(not kept for this attempt)"
	}
	return []Header{{"Content-Type", "application/json"}, {"User-Agent", UserAgent}, {"webhook-id", d.EventID},
		{"webhook-timestamp", strconv.FormatInt(a.At.Unix(), 10)}, {"webhook-signature", sig}}
}

// requestBody is the start of the body that delivers e, as the delivery log shows it.
func requestBody(typ string, at time.Time, data string) string {
	b := Body(typ, at, data)
	return text(b[:min(len(b), RequestBodyLimit)])
}

// Succeeded reports whether the attempt had a 2xx answer.
func (a Attempt) Succeeded() bool { return a.StatusCode >= 200 && a.StatusCode < 300 }

// deliveryPrefix starts the id of a delivery on the wire.
const deliveryPrefix = "whd_"

// DeliveryID is the id of the delivery whose row id is id: "whd_" and the row's number. Deliveries are
// written a batch at a time by one INSERT … SELECT (queue.go, ledger.go), where no random id is made.
func DeliveryID(id int64) string { return deliveryPrefix + strconv.FormatInt(id, 10) }

// parseDeliveryID reads a DeliveryID.
func parseDeliveryID(s string) (int64, bool) {
	n, ok := strings.CutPrefix(s, deliveryPrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(n, 10, 64)
	return id, err == nil && id > 0 && DeliveryID(id) == s
}

// WireDelivery is a delivery as the v1 API shows it.
type WireDelivery struct {
	ID           string        `json:"id"`
	Object       string        `json:"object"`
	Endpoint     string        `json:"endpoint"`
	EventID      string        `json:"event_id"`
	EventType    string        `json:"event_type"`
	Status       string        `json:"status"`
	AttemptCount int           `json:"attempt_count"`
	NextAttempt  *int64        `json:"next_attempt"` // Unix seconds; null unless pending
	Created      int64         `json:"created"`
	Attempts     []WireAttempt `json:"attempts"`
}

// WireAttempt is an attempt as the v1 API shows it.
type WireAttempt struct {
	Created    int64  `json:"created"`
	StatusCode int    `json:"status_code"`
	LatencyMS  int64  `json:"latency_ms"`
	Response   string `json:"response"`
	Error      string `json:"error"`
}

// Wire is the delivery, to endpoint, as the v1 API shows it.
func (d Delivery) Wire(endpoint string) WireDelivery {
	w := WireDelivery{ID: DeliveryID(d.ID), Object: "webhook_delivery", Endpoint: endpoint, EventID: d.EventID, EventType: d.EventType,
		Status: strings.ToLower(d.Status), AttemptCount: d.AttemptN, Created: d.CreatedAt.Unix(), Attempts: []WireAttempt{}}
	if d.Status == StatusPending {
		next := d.NextAttempt.Unix()
		w.NextAttempt = &next
	}
	for _, a := range d.Attempts {
		w.Attempts = append(w.Attempts, WireAttempt{Created: a.At.Unix(), StatusCode: a.StatusCode, LatencyMS: a.LatencyMS,
			Response: a.Response, Error: a.Error})
	}
	return w
}

// deliveryColumns are the columns scanDelivery reads, from deliveryFrom.
var deliveryColumns = `d.id, ` + derivedRefColumns() + `, COALESCE(e.event_id, ''), COALESCE(e.type, ''), d.status, d.attempts,
	d.next_attempt, d.created_at, COALESCE(e.data, ''), COALESCE(e.created_at, 0)`

// deliveryFrom is the FROM clause of deliveryColumns: a delivery, with its row of events unless it
// delivers a derived event (ledger.go), which nameEvents names.
const deliveryFrom = ` FROM webhook_deliveries d LEFT JOIN events e ON e.id = d.event_id `

func scanDelivery(row interface{ Scan(...any) error }) (Delivery, error) {
	var d Delivery
	var next, created, eventAt int64
	var data string
	r := newScanRefs()
	err := row.Scan(append(append([]any{&d.ID}, r.dest()...), &d.EventID, &d.EventType, &d.Status, &d.AttemptN, &next, &created,
		&data, &eventAt)...)
	d.NextAttempt, d.CreatedAt, d.ref = time.UnixMilli(next), time.UnixMilli(created), r.ref()
	if d.EventID != "" {
		d.Body = requestBody(d.EventType, time.UnixMilli(eventAt), data)
	}
	return d, err
}

// nameEvents fills the event id and type of the deliveries of ds that deliver derived events.
func nameEvents(ctx context.Context, q store.Querier, ds []Delivery) error {
	var refs []derivedRef
	for _, d := range ds {
		if d.ref.id != 0 {
			refs = append(refs, d.ref)
		}
	}
	if len(refs) == 0 {
		return nil
	}
	derived, err := derivedEvents(ctx, q, refs)
	if err != nil {
		return err
	}
	for i := range ds {
		if e, ok := derived[ds[i].ref]; ok {
			ds[i].EventID, ds[i].EventType, ds[i].Body = e.ID, e.Type, requestBody(e.Type, e.CreatedAt, string(e.Data))
		}
	}
	return nil
}

// Deliveries returns a page of the deliveries to one of the merchant's endpoints, newest first, each
// with its attempts, and whether there are more beyond it (as checkout.Service.List pages payment
// intents: starting_after and ending_before name deliveries by their ids).
func (s *Endpoints) Deliveries(ctx context.Context, merchantID, endpointID string, p checkout.ListParams) ([]Delivery, bool, error) {
	var out []Delivery
	err := s.db.Read(ctx, func(q store.Querier) error {
		e, err := getEndpoint(ctx, q, merchantID, endpointID)
		if err != nil {
			return err
		}
		where, order := `WHERE d.endpoint_id = $1`, "DESC"
		args := []any{e.ID}
		for _, c := range []struct{ name, id, cond string }{
			{"starting_after", p.StartingAfter, " AND d.id < $"}, {"ending_before", p.EndingBefore, " AND d.id > $"},
		} {
			if c.id == "" {
				continue
			}
			pos, ok := parseDeliveryID(c.id)
			if !ok {
				return fault.Invalid(c.name, "%s must be the id of a delivery (whd_…); %s is not", c.name, clip(c.id))
			}
			args = append(args, pos)
			where += c.cond + strconv.Itoa(len(args))
			if c.name == "ending_before" {
				order = "ASC"
			}
		}
		args = append(args, p.Limit+1)
		rows, err := q.QueryContext(ctx, `SELECT `+deliveryColumns+deliveryFrom+
			where+` ORDER BY d.id `+order+` LIMIT $`+strconv.Itoa(len(args)), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := nameEvents(ctx, q, out); err != nil {
			return err
		}
		return readAttempts(ctx, q, out)
	})
	if err != nil {
		return nil, false, err
	}
	out, more := checkout.TrimPage(out, p)
	return out, more, nil
}

// readAttempts fills the attempts of ds, oldest first.
func readAttempts(ctx context.Context, q store.Querier, ds []Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	at := map[int64]int{}
	in := make([]string, len(ds))
	args := make([]any, len(ds))
	for i, d := range ds {
		at[d.ID] = i
		in[i], args[i] = "$"+strconv.Itoa(i+1), d.ID
	}
	rows, err := q.QueryContext(ctx, `SELECT delivery_id, status_code, latency_ms, response, error, created_at, signature, response_headers
		FROM webhook_attempts WHERE delivery_id IN (`+strings.Join(in, ", ")+`) ORDER BY delivery_id, id`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, created int64
		var a Attempt
		if err := rows.Scan(&id, &a.StatusCode, &a.LatencyMS, &a.Response, &a.Error, &created, &a.Signature, &a.ResponseHeaders); err != nil {
			return err
		}
		a.At, a.Error = time.UnixMilli(created), shownError(a.Error)
		d := &ds[at[id]]
		d.Attempts = append(d.Attempts, a)
	}
	return rows.Err()
}

// shownError is a stored attempt's error as the merchant reads it: "" or one of the delivery log's
// phrases (failures), which are all the engine writes. An attempt recorded before it wrote only those
// kept the whole error, which can name addresses of the operator's network; it reads as the phrase
// its words amount to.
func shownError(stored string) string {
	switch {
	case stored == "" || slices.Contains(failures, stored):
		return stored
	case strings.HasSuffix(stored, " is not public"):
		return failNotAllowed
	case strings.HasPrefix(stored, "no answer within "):
		return failTimeout
	case strings.Contains(stored, "tls: "):
		return failTLS
	case strings.HasPrefix(stored, "dial "):
		return failConnect
	case strings.HasPrefix(stored, "invalid URL: "):
		return failURL
	}
	return failAnswer
}

// Resend queues a new delivery of a delivery's event to the same endpoint, due now, with a fresh
// schedule of retries, and returns it. The delivery resent is left as it is. A disabled endpoint is
// sent nothing: it must be enabled first.
func (s *Endpoints) Resend(ctx context.Context, merchantID, endpointID, deliveryID string, by Actor) (Delivery, error) {
	var d Delivery
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := time.UnixMilli(s.now().UnixMilli())
		e, err := lockEndpoint(ctx, tx, merchantID, endpointID, now)
		if err != nil {
			return err
		}
		noDelivery := fault.NotFound("No delivery %s to webhook endpoint %s.", clip(deliveryID), e.EndpointID)
		id, ok := parseDeliveryID(deliveryID)
		if !ok {
			return noDelivery
		}
		if e.Disabled {
			return fault.Conflict("endpoint_disabled", "Webhook endpoint %s is disabled: enable it, then resend.", e.EndpointID)
		}
		var newID int64
		err = tx.QueryRowContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, event_id, transaction_ref, change_ref, merchant_id,
			next_attempt, created_at, updated_at) SELECT endpoint_id, event_id, transaction_ref, change_ref, merchant_id, $3, $3, $3 FROM webhook_deliveries
			WHERE id = $1 AND endpoint_id = $2 RETURNING id`,
			id, e.ID, now.UnixMilli()).Scan(&newID)
		if errors.Is(err, sql.ErrNoRows) {
			return noDelivery
		}
		if err != nil {
			return err
		}
		if d, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+deliveryFrom+`WHERE d.id = $1`, newID)); err != nil {
			return err
		}
		ds := []Delivery{d}
		if err := nameEvents(ctx, tx, ds); err != nil {
			return err
		}
		d = ds[0]
		return record(ctx, tx, by, merchantID, "webhook_delivery.resend", e.EndpointID, DeliveryID(id)+" as "+DeliveryID(newID)+" ("+d.EventID+")", now)
	})
	return d, err
}

// Ping queues a test event (event.WebhookEndpointPing, its data the endpoint as the API shows it) for
// the endpoint alone, due now, signed and sent as every delivery is, and returns its delivery. No
// other endpoint receives it, whatever it subscribes to. A disabled endpoint is sent nothing: it must
// be enabled first.
func (s *Endpoints) Ping(ctx context.Context, merchantID, endpointID string, by Actor) (Delivery, error) {
	var d Delivery
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		now := time.UnixMilli(s.now().UnixMilli())
		e, err := lockEndpoint(ctx, tx, merchantID, endpointID, now)
		if err != nil {
			return err
		}
		if e.Disabled {
			return fault.Conflict("endpoint_disabled", "Webhook endpoint %s is disabled: enable it, then send a test event.", e.EndpointID)
		}
		ev, err := event.New(merchantID, event.WebhookEndpointPing, e.Wire(), now)
		if err != nil {
			return err
		}
		row, err := ev.Insert(ctx, tx)
		if err != nil {
			return err
		}
		var id int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO webhook_deliveries (endpoint_id, event_id, merchant_id, next_attempt, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $4, $4) RETURNING id`, e.ID, row, merchantID, now.UnixMilli()).Scan(&id); err != nil {
			return err
		}
		if d, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryColumns+deliveryFrom+`WHERE d.id = $1`, id)); err != nil {
			return err
		}
		return record(ctx, tx, by, merchantID, "webhook_endpoint.ping", e.EndpointID, DeliveryID(id)+" ("+ev.ID+")", now)
	})
	return d, err
}

// SummaryWindow is how many of an endpoint's newest deliveries a Summary counts: a bounded read of its
// index, however busy the endpoint.
const SummaryWindow = 100

// Summary counts an endpoint's newest deliveries (at most SummaryWindow) by status, and says how its
// newest attempted delivery ended: what the dashboard's list and endpoint page show at a glance.
type Summary struct {
	Succeeded, Failed, Pending int
	Last                       *Attempt // the last attempt of the newest delivery attempted; nil before any
}

// Total is how many deliveries s counts.
func (s Summary) Total() int { return s.Succeeded + s.Failed + s.Pending }

// Summarize returns the summary of the deliveries to the endpoint whose row id is endpointRowID.
func (s *Endpoints) Summarize(ctx context.Context, endpointRowID int64) (Summary, error) {
	var sum Summary
	err := s.db.Read(ctx, func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT status, COUNT(*) FROM (SELECT status FROM webhook_deliveries WHERE endpoint_id = $1
			ORDER BY id DESC LIMIT $2) recent GROUP BY status`, endpointRowID, SummaryWindow)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var status string
			var n int
			if err := rows.Scan(&status, &n); err != nil {
				return err
			}
			switch status {
			case StatusSucceeded:
				sum.Succeeded = n
			case StatusFailed:
				sum.Failed = n
			default:
				sum.Pending += n
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		var a Attempt
		var created int64
		err = q.QueryRowContext(ctx, `SELECT status_code, latency_ms, response, error, created_at FROM webhook_attempts
			WHERE delivery_id = (SELECT MAX(id) FROM webhook_deliveries WHERE endpoint_id = $1 AND attempts > 0) ORDER BY id DESC LIMIT 1`,
			endpointRowID).Scan(&a.StatusCode, &a.LatencyMS, &a.Response, &a.Error, &created)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		a.At, a.Error = time.UnixMilli(created), shownError(a.Error)
		sum.Last = &a
		return err
	})
	return sum, err
}
