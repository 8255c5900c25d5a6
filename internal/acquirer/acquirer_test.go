package acquirer_test

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	connection "github.com/moov-io/iso8583-connection"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/acquirer/acquirertest"
	"github.com/kassapay/kassa/internal/card/cardtest"
	"github.com/kassapay/kassa/internal/clock"
)

// day0 is the host's clock in these tests: a minute before midnight UTC.
var day0 = time.Date(2026, 11, 23, 23, 59, 0, 0, time.UTC)

type fixture struct {
	*acquirer.Host
	clock *clock.Manual
	dir   string
	log   *cardtest.Buffer
	t     *testing.T
}

// start runs a host on a fresh data directory with both listeners and a manual clock at day0.
func start(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{clock: clock.NewManual(day0), dir: t.TempDir(), t: t}
	f.restart()
	return f
}

// restart closes the host and starts another on the same data directory.
func (f *fixture) restart() {
	f.t.Helper()
	if f.Host != nil {
		if err := f.Close(); err != nil {
			f.t.Fatal(err)
		}
	}
	log, buf := cardtest.Logger(f.t)
	f.log = buf
	h, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", DataDir: f.dir, Now: f.clock.Now, Logger: log})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { h.Close() })
	f.Host = h
}

// get fetches path from the HTTP listener and returns the status and body.
func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	resp, err := http.Get("http://" + f.HTTPAddr() + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	cardtest.Check(f.t, path, string(b))
	return resp.StatusCode, string(b)
}

// control posts body to /control and returns the status.
func (f *fixture) control(body string) int {
	f.t.Helper()
	resp, err := http.Post("http://"+f.HTTPAddr()+"/control", "application/json", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// journal returns the journal entries of reference ref.
func (f *fixture) journal(ref string) []acquirer.Entry {
	f.t.Helper()
	status, body := f.get("/journal?reference=" + ref)
	var out []acquirer.Entry
	if err := json.Unmarshal([]byte(body), &out); status != http.StatusOK || err != nil {
		f.t.Fatalf("GET /journal: %d %s (%v)", status, body, err)
	}
	return out
}

// settlement returns the rows of the day's report, header first.
func (f *fixture) settlement(day string) [][]string {
	f.t.Helper()
	status, body := f.get("/settlement/" + day + ".csv")
	if status != http.StatusOK {
		f.t.Fatalf("GET settlement: %d %s", status, body)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		f.t.Fatal(err)
	}
	return rows
}

// expect sends m and checks the answer's response code.
func expect(t *testing.T, term *acquirertest.Terminal, m acquirertest.Fields, code string) acquirertest.Fields {
	t.Helper()
	a := term.Send(t, m)
	if a[39] != code {
		t.Fatalf("%s %s of %s: answered %q, want %q (%v)", m[0], m[3], m[4], a[39], code, a)
	}
	return a
}

func TestTestCards(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	for _, c := range []struct {
		name, pan, code string
		change          func(m acquirertest.Fields)
	}{
		{"visa", cardtest.Visa, "00", nil},
		{"visa 2", cardtest.Visa2, "00", nil},
		{"mastercard", cardtest.Mastercard, "00", nil},
		{"any other valid card", "4012888888881881", "00", nil},
		{"do not honour", cardtest.Declined, "05", nil},
		{"insufficient funds", cardtest.InsufficientFunds, "51", nil},
		{"expired card", cardtest.ExpiredCard, "54", nil},
		{"CVV2 mismatch", cardtest.IncorrectCVC, "N7", nil},
		{"lost", cardtest.LostCard, "41", nil},
		{"stolen", cardtest.StolenCard, "43", nil},
		{"system malfunction", cardtest.ProcessingError, "96", nil},
		{"Luhn-invalid", "4242424242424241", "14", nil},
		{"expiry last month", cardtest.Visa, "54", func(m acquirertest.Fields) { m[14] = "2610" }},
		{"expiry this month", cardtest.Visa, "00", func(m acquirertest.Fields) { m[14] = "2611" }},
		{"3-D Secure failed", cardtest.Visa, "05", func(m acquirertest.Fields) { m[48] = "CV03123AU01N" }},
		{"3-D Secure passed", cardtest.Visa, "00", func(m acquirertest.Fields) { m[48] = "AU01YCV03123" }},
		{"stored card, recurring, no CVV2", cardtest.Visa, "00", func(m acquirertest.Fields) { m[22], m[25], m[48] = "100", "02", "" }},
	} {
		for _, mti := range []string{"0100", "0200"} {
			t.Run(c.name+" "+mti, func(t *testing.T) {
				m := term.Purchase(mti, c.pan, 1999)
				if c.change != nil {
					c.change(m)
				}
				if m[48] == "" {
					delete(m, 48)
				}
				a := expect(t, term, m, c.code)
				if want := mti[:2] + "10"; a[0] != want {
					t.Errorf("MTI %s, want %s", a[0], want)
				}
				for _, id := range []int{11, 37, 41, 42, 62} {
					if a[id] != m[id] {
						t.Errorf("field %d: %q, want the request's %q", id, a[id], m[id])
					}
				}
				if approved := c.code == "00"; len(a[38]) != 6 && approved || a[38] != "" && !approved {
					t.Errorf("authorization code %q for %s", a[38], c.code)
				}
			})
		}
	}
	t.Run("card verification", func(t *testing.T) {
		expect(t, term, term.Purchase("0100", cardtest.Visa, 0), "00")
		expect(t, term, term.Purchase("0200", cardtest.Visa, 0), "13") // a sale of nothing
	})
}

func TestCapture(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	auth := term.Purchase("0100", cardtest.Visa, 1000)
	expect(t, term, auth, "00")

	expect(t, term, term.Capture(auth, 1001), "13") // more than authorized
	c := expect(t, term, term.Capture(auth, 600), "00")
	if len(c[38]) != 6 {
		t.Errorf("capture's authorization code %q", c[38])
	}
	expect(t, term, term.Capture(auth, 400), "12") // once per authorization

	unknown := term.Purchase("0100", cardtest.Visa, 1000)
	term.Fill(unknown) // never sent
	expect(t, term, term.Capture(unknown, 100), "25")

	declined := term.Purchase("0100", cardtest.Declined, 1000)
	expect(t, term, declined, "05")
	expect(t, term, term.Capture(declined, 100), "12")

	sale := term.Purchase("0200", cardtest.Visa, 1000)
	expect(t, term, sale, "00")
	wrong := term.Capture(sale, 100)
	wrong[90] = "0100" + wrong[90][4:] // a sale named as an authorization: not found
	expect(t, term, wrong, "25")

	other := acquirertest.Dial(t, f.Addr()) // another terminal cannot capture this one's authorization
	auth2 := term.Purchase("0100", cardtest.Visa, 1000)
	expect(t, term, auth2, "00")
	expect(t, other, other.Capture(auth2, 100), "25")
	euros := term.Capture(auth2, 100)
	euros[49] = "978"
	expect(t, term, euros, "12")
}

func TestRefund(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	sale := term.Purchase("0200", cardtest.Visa, 1000)
	expect(t, term, sale, "00")
	expect(t, term, term.Refund(sale, 400), "00")
	expect(t, term, term.Refund(sale, 601), "13") // 400 + 601 > 1000
	expect(t, term, term.Refund(sale, 600), "00")
	expect(t, term, term.Refund(sale, 1), "13")

	auth := term.Purchase("0100", cardtest.Visa, 1000)
	expect(t, term, auth, "00")
	expect(t, term, term.Refund(auth, 100), "12") // an authorization has not been paid
	capture := term.Capture(auth, 700)
	expect(t, term, capture, "00")
	expect(t, term, term.Refund(capture, 701), "13") // more than captured, though not than authorized
	expect(t, term, term.Refund(capture, 700), "00")

	never := term.Purchase("0200", cardtest.Visa, 1000)
	term.Fill(never)
	expect(t, term, term.Refund(never, 100), "25")

	declined := term.Purchase("0200", cardtest.InsufficientFunds, 1000)
	expect(t, term, declined, "51")
	expect(t, term, term.Refund(declined, 100), "12")
}

func TestReversal(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())

	t.Run("void of an authorization", func(t *testing.T) {
		auth := term.Purchase("0100", cardtest.Visa, 1000)
		expect(t, term, auth, "00")
		expect(t, term, term.Reversal(auth), "00")
		expect(t, term, term.Capture(auth, 100), "12")
		expect(t, term, term.Reversal(auth), "00") // another 0400 of it: still undone
	})
	t.Run("of a captured authorization", func(t *testing.T) {
		auth := term.Purchase("0100", cardtest.Visa, 1000)
		expect(t, term, auth, "00")
		capture := term.Capture(auth, 1000)
		expect(t, term, capture, "00")
		expect(t, term, term.Reversal(auth), "12")
		// A timeout reversal of the capture frees the authorization for another capture.
		expect(t, term, term.Reversal(capture), "00")
		expect(t, term, term.Refund(capture, 100), "12")
		expect(t, term, term.Capture(auth, 900), "00")
	})
	t.Run("of a sale", func(t *testing.T) {
		sale := term.Purchase("0200", cardtest.Visa, 1000)
		expect(t, term, sale, "00")
		wrong := term.Reversal(sale)
		wrong[4] = "000000000999"
		expect(t, term, wrong, "13")
		expect(t, term, term.Reversal(sale), "00")
		expect(t, term, term.Refund(sale, 100), "12")
	})
	t.Run("of a refund", func(t *testing.T) {
		sale := term.Purchase("0200", cardtest.Visa, 1000)
		expect(t, term, sale, "00")
		refund := term.Refund(sale, 1000)
		expect(t, term, refund, "00")
		expect(t, term, term.Reversal(sale), "12") // refunded
		expect(t, term, term.Reversal(refund), "00")
		expect(t, term, term.Refund(sale, 1000), "00") // the reversed refund no longer counts
	})
	t.Run("of a declined request", func(t *testing.T) {
		sale := term.Purchase("0200", cardtest.Declined, 1000)
		expect(t, term, sale, "05")
		expect(t, term, term.Reversal(sale), "00")
	})
	t.Run("before its original", func(t *testing.T) {
		sale := term.Purchase("0200", cardtest.Visa, 1000)
		term.Fill(sale)
		expect(t, term, term.Reversal(sale), "25")
		a := expect(t, term, sale, "12") // it arrives late: refused, having been reversed
		if a[38] != "" {
			t.Errorf("a late original got authorization code %q", a[38])
		}
		entries := f.journal(sale[62])
		if len(entries) != 2 || entries[1].MTI != "0200" || !entries[1].Reversed || entries[1].ResponseCode != "12" {
			t.Errorf("journal: %+v", entries)
		}
		f.restart() // the late original is known after a restart too, and so is a reversal of none
		term := acquirertest.Dial(t, f.Addr())
		expect(t, term, sale, "12")
		late := term.Purchase("0100", cardtest.Visa, 1000)
		term.Fill(late)
		expect(t, term, term.Reversal(late), "25")
		f.restart()
		term = acquirertest.Dial(t, f.Addr())
		expect(t, term, late, "12")
	})
}

func TestRetransmission(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	sale := term.Purchase("0200", cardtest.Visa, 1000)
	first := expect(t, term, sale, "00")
	again := expect(t, term, sale.Clone(), "00")
	if again[38] != first[38] {
		t.Errorf("authorization code %q, then %q", first[38], again[38])
	}
	refund := term.Refund(sale, 600)
	expect(t, term, refund, "00")
	expect(t, term, refund.Clone(), "00") // not a second refund:
	expect(t, term, term.Refund(sale, 400), "00")

	declined := term.Purchase("0100", cardtest.Declined, 1000)
	expect(t, term, declined, "05")
	expect(t, term, declined.Clone(), "05")

	entries := f.journal(sale[62])
	if len(entries) != 2 || entries[0].Status != acquirer.StatusProcessed || entries[1].Status != acquirer.StatusRetransmission ||
		entries[1].AuthCode != first[38] {
		t.Errorf("journal of the sale: %+v", entries)
	}

	// Fields 7, 11 and 41 of the sale on another message: not a retransmission, and refused.
	reuse := term.Purchase("0100", cardtest.Visa, 1000)
	reuse[7], reuse[11] = sale[7], sale[11]
	expect(t, term, reuse, "12")
	// "STAN: unique per terminal ... per day": the sale's STAN later that day is refused too.
	later := term.Purchase("0200", cardtest.Visa, 1000)
	later[7], later[11] = sale[7][:4]+"235959", sale[11]
	if later[7] == sale[7] {
		later[7] = sale[7][:4] + "000000"
	}
	expect(t, term, later, "12")
	if e := f.journal(later[62]); len(e) != 1 || e[0].Status != acquirer.StatusRefused || !strings.Contains(e[0].Note, "STAN reused") {
		t.Errorf("journal of a reused STAN: %+v", e)
	}

	// After a restart on the same data directory: the same answers, and nothing done twice.
	f.restart()
	before := term
	term = acquirertest.Dial(t, f.Addr())
	term.TID, term.MID = before.TID, before.MID
	if a := expect(t, term, sale.Clone(), "00"); a[38] != first[38] {
		t.Errorf("after a restart, authorization code %q, want %q", a[38], first[38])
	}
	expect(t, term, refund.Clone(), "00")
	expect(t, term, term.Refund(sale, 1), "13") // 600 + 400 refunded before the restart
	expect(t, term, declined.Clone(), "05")
	expect(t, term, reuse.Clone(), "12")
	// The same date a year later is another day: the sale's fields 7, 11 and 41 are a new sale.
	f.clock.Advance(365 * 24 * time.Hour)
	nextYear := sale.Clone()
	nextYear[62] = acquirertest.Reference()
	if a := expect(t, term, nextYear, "00"); a[38] == first[38] {
		t.Errorf("a sale a year later got the old authorization code %q", a[38])
	}
	if n := len(f.journal(sale[62])); n != 3 {
		t.Errorf("%d journal entries of the sale, want 3: %+v", n, f.journal(sale[62]))
	}
}

func TestSignOn(t *testing.T) {
	f := start(t)
	term := acquirertest.Connect(t, f.Addr())
	expect(t, term, acquirertest.Fields{0: "0800", 24: "301"}, "00") // an echo needs no sign-on
	sale := term.Purchase("0200", cardtest.Visa, 1000)
	expect(t, term, sale, "91")
	if e := f.journal(sale[62]); len(e) != 1 || e[0].Status != acquirer.StatusRefused {
		t.Errorf("journal: %+v", e)
	}
	expect(t, term, acquirertest.Fields{0: "0800", 24: "001"}, "00")
	expect(t, term, sale.Clone(), "00") // the refusal did nothing, so this is no retransmission
	expect(t, term, acquirertest.Fields{0: "0800", 24: "002"}, "00")
	expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "91")
	expect(t, term, acquirertest.Fields{0: "0800", 24: "009"}, "30")
}

func TestFormatErrors(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	for name, change := range map[string]func(m acquirertest.Fields){
		"no expiry":               func(m acquirertest.Fields) { delete(m, 14) },
		"no reference":            func(m acquirertest.Fields) { delete(m, 62) },
		"no local time":           func(m acquirertest.Fields) { delete(m, 12) },
		"entry mode not in use":   func(m acquirertest.Fields) { m[22] = "051" },
		"condition not in use":    func(m acquirertest.Fields) { m[25] = "00" },
		"expiry month 13":         func(m acquirertest.Fields) { m[14] = "3013" },
		"field 48 not TLV":        func(m acquirertest.Fields) { m[48] = "CV3123" },
		"CVV2 of 2 digits":        func(m acquirertest.Fields) { m[48] = "CV0212" },
		"3-D Secure outcome U":    func(m acquirertest.Fields) { m[48] = "AU01U" },
		"currency not numeric":    func(m acquirertest.Fields) { m[49] = "CAD" },
		"transmission in month 0": func(m acquirertest.Fields) { m[7] = "0023120000" },
		"PAN with letters":        func(m acquirertest.Fields) { m[2] = "4242x24242424242" },
	} {
		t.Run(name, func(t *testing.T) {
			m := term.Purchase("0200", cardtest.Visa, 1000)
			change(m)
			expect(t, term, m, "30")
		})
	}
	t.Run("refund without its original", func(t *testing.T) {
		sale := term.Purchase("0200", cardtest.Visa, 1000)
		expect(t, term, sale, "00")
		refund := term.Refund(sale, 100)
		delete(refund, 90)
		expect(t, term, refund, "30")
	})
	t.Run("unknown processing code", func(t *testing.T) {
		m := term.Purchase("0200", cardtest.Visa, 1000)
		m[3] = "010000"
		expect(t, term, m, "12")
	})
	t.Run("message outside the profile", func(t *testing.T) {
		a := expect(t, term, acquirertest.Fields{0: "0600"}, "12")
		if a[0] != "0610" {
			t.Errorf("MTI %s", a[0])
		}
	})
	t.Run("blank terminal id", func(t *testing.T) {
		m := term.Purchase("0200", cardtest.Visa, 1000)
		m[41] = "        " // without fields 7, 11 and 41 a message cannot be known again
		a := expect(t, term, m, "30")
		if e := f.journal(m[62]); len(e) != 1 || e[0].Status != acquirer.StatusRefused {
			t.Errorf("journal %+v of %v", e, a)
		}
	})
}

func TestDrop(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	if s := f.control(`{"drop_next": 2}`); s != http.StatusOK {
		t.Fatalf("POST /control: %d", s)
	}
	expect(t, term, acquirertest.Fields{0: "0800", 24: "301"}, "00") // never dropped
	auth := term.Purchase("0100", cardtest.Visa, 1000)
	if a, err := term.Exchange(auth, 300*time.Millisecond); !errors.Is(err, connection.ErrSendTimeout) {
		t.Fatalf("answer %v, error %v; want no answer", a, err)
	}
	e := f.journal(auth[62])
	if len(e) != 1 || !e[0].Dropped || e[0].ResponseCode != "00" || e[0].Status != acquirer.StatusProcessed {
		t.Fatalf("journal of the dropped authorization: %+v", e)
	}
	// The reversal of what timed out is answered, and the authorization was in effect until then.
	expect(t, term, term.Reversal(auth), "00")
	sale := term.Purchase("0200", cardtest.Visa, 1000)
	if _, err := term.Exchange(sale, 300*time.Millisecond); !errors.Is(err, connection.ErrSendTimeout) {
		t.Fatalf("the second of drop_next 2 was answered: %v", err)
	}
	expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "00")
	// A retransmission of a dropped request gets the answer.
	expect(t, term, sale.Clone(), "00")

	rows := f.settlement("2026-11-23")
	if len(rows) != 4 || rows[1][9] != "true" || rows[2][9] != "false" {
		t.Errorf("settlement: %v", rows)
	}

	t.Run("drop rate", func(t *testing.T) {
		if s := f.control(`{"drop_rate": 1}`); s != http.StatusOK {
			t.Fatalf("POST /control: %d", s)
		}
		sale := term.Purchase("0200", cardtest.Visa, 1000)
		if _, err := term.Exchange(sale, 300*time.Millisecond); !errors.Is(err, connection.ErrSendTimeout) {
			t.Fatalf("answered at drop rate 1: %v", err)
		}
		expect(t, term, term.Reversal(sale), "00")
		expect(t, term, acquirertest.Fields{0: "0800", 24: "301"}, "00")
		f.control(`{"drop_rate": 0}`)
		expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "00")
	})
	t.Run("from the start", func(t *testing.T) {
		h, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), DropRate: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		term := acquirertest.Dial(t, h.Addr())
		if _, err := term.Exchange(term.Purchase("0100", cardtest.Visa, 1000), 300*time.Millisecond); !errors.Is(err, connection.ErrSendTimeout) {
			t.Fatalf("answered at drop rate 1: %v", err)
		}
	})
}

func TestLatency(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	const latency = 300 * time.Millisecond
	if s := f.control(`{"latency": "300ms"}`); s != http.StatusOK {
		t.Fatalf("POST /control: %d", s)
	}
	began := time.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "00") })
	}
	wg.Wait()
	// Each answer waits; requests in flight wait at the same time (one after another: 20 × latency).
	if took := time.Since(began); took < latency || took > 5*latency {
		t.Errorf("20 requests at once took %v at a latency of %v", took, latency)
	}
	f.control(`{"latency": "0s"}`)
	began = time.Now()
	expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "00")
	if took := time.Since(began); took >= latency {
		t.Errorf("a request took %v without latency", took)
	}

	h, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	term = acquirertest.Dial(t, h.Addr())
	began = time.Now()
	expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "00")
	if took := time.Since(began); took < latency {
		t.Errorf("a request took %v at a configured latency of %v", took, latency)
	}
}

func TestControl(t *testing.T) {
	f := start(t)
	for body, want := range map[string]int{
		`{"drop_next": 0, "latency": "1ms", "drop_rate": 0.5}`: http.StatusOK,
		`{}`:                     http.StatusOK,
		`{"drop_next": -1}`:      http.StatusBadRequest,
		`{"latency": "soon"}`:    http.StatusBadRequest,
		`{"latency": "-1s"}`:     http.StatusBadRequest,
		`{"drop_rate": 1.5}`:     http.StatusBadRequest,
		`{"drop_rate": -0.1}`:    http.StatusBadRequest,
		`{"drop_everything": 1}`: http.StatusBadRequest,
		`not json`:               http.StatusBadRequest,
	} {
		if got := f.control(body); got != want {
			t.Errorf("POST /control %s: %d, want %d", body, got, want)
		}
	}
	for path, want := range map[string]int{
		"/healthz":                   http.StatusOK,
		"/settlement/2026-11-23.csv": http.StatusOK,
		"/settlement/2026-13-01.csv": http.StatusBadRequest,
		"/settlement/20261123.csv":   http.StatusBadRequest,
		"/settlement/2026-11-23.txt": http.StatusNotFound,
		"/journal":                   http.StatusBadRequest,
		"/journal?reference=none":    http.StatusOK,
	} {
		if got, body := f.get(path); got != want {
			t.Errorf("GET %s: %d %s, want %d", path, got, body, want)
		}
	}
	if _, body := f.get("/journal?reference=none"); strings.TrimSpace(body) != "[]" {
		t.Errorf("journal of nothing: %s", body)
	}
	if _, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), DropRate: 2}); err == nil {
		t.Error("started with a drop rate of 2")
	}
}

func TestSettlement(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	sale := term.Purchase("0200", cardtest.Visa, 1999)
	s := expect(t, term, sale, "00")
	auth := term.Purchase("0100", cardtest.Mastercard, 5000)
	a := expect(t, term, auth, "00")
	voided := term.Purchase("0100", cardtest.Visa, 700)
	v := expect(t, term, voided, "00")
	expect(t, term, term.Reversal(voided), "00")
	expect(t, term, term.Purchase("0200", cardtest.Declined, 1000), "05") // declines are not listed
	expect(t, term, acquirertest.Fields{0: "0800", 24: "301"}, "00")

	f.clock.Advance(2 * time.Minute) // past midnight UTC
	capture := term.Capture(auth, 4000)
	c := expect(t, term, capture, "00")
	refund := term.Refund(sale, 999)
	r := expect(t, term, refund, "00")
	expect(t, term, term.Reversal(refund), "00") // yesterday's 0200 refund, reversed today: its row says so

	day1 := f.settlement("2026-11-23")
	want1 := [][]string{
		{"date", "mti", "processing_code", "stan", "rrn", "reference", "amount", "currency", "auth_code", "reversed"},
		{"2026-11-23", "0200", "000000", sale[11], sale[37], sale[62], "1999", "124", s[38], "false"},
		{"2026-11-23", "0100", "000000", auth[11], auth[37], auth[62], "5000", "124", a[38], "false"},
		{"2026-11-23", "0100", "000000", voided[11], voided[37], voided[62], "700", "124", v[38], "true"},
	}
	if !equalRows(day1, want1) {
		t.Errorf("settlement of the first day:\n%v\nwant\n%v", day1, want1)
	}
	day2 := f.settlement("2026-11-24")
	want2 := [][]string{
		want1[0],
		{"2026-11-24", "0220", "000000", capture[11], capture[37], capture[62], "4000", "124", c[38], "false"},
		{"2026-11-24", "0200", "200000", refund[11], refund[37], refund[62], "999", "124", r[38], "true"},
	}
	if !equalRows(day2, want2) {
		t.Errorf("settlement of the second day:\n%v\nwant\n%v", day2, want2)
	}
	// The report is read a page at a time: the same rows whatever the page's size, a day that fills
	// its last page included.
	for _, size := range []int{1, 2, 3} {
		restore := acquirer.SetSettlementPage(size)
		if rows := f.settlement("2026-11-23"); !equalRows(rows, want1) {
			t.Errorf("settlement read %d rows at a time:\n%v\nwant\n%v", size, rows, want1)
		}
		restore()
	}
	if rows := f.settlement("2026-11-25"); len(rows) != 1 {
		t.Errorf("settlement of a day without approvals: %v", rows)
	}
	_, body := f.get("/settlement/2026-11-23.csv")
	if !strings.HasPrefix(body, "date,mti,processing_code,stan,rrn,reference,amount,currency,auth_code,reversed\r\n") ||
		strings.Count(body, "\r\n") != 4 {
		t.Errorf("not RFC 4180 (CRLF after every record): %q", body)
	}
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], ",") != strings.Join(b[i], ",") {
			return false
		}
	}
	return true
}

func TestJournal(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	cvv := cardtest.AbsentCVV(t, "")
	sale := term.Purchase("0200", cardtest.Visa, 1999)
	sale[48] = "CV04" + cvv + "AU01Y"
	s := expect(t, term, sale, "00")
	stored := term.Purchase("0200", cardtest.Mastercard, 500)
	stored[22], stored[25] = "100", "02"
	delete(stored, 48)
	expect(t, term, stored, "00")
	refund := term.Refund(sale, 999)
	refund[62] = sale[62] // the reference of the operation it belongs to, as the reversal carries
	expect(t, term, refund, "00")

	got := f.journal(sale[62])
	if len(got) != 2 {
		t.Fatalf("journal: %+v", got)
	}
	if !got[0].ReceivedAt.Equal(day0) {
		t.Errorf("received at %v, want %v", got[0].ReceivedAt, day0)
	}
	want := acquirer.Entry{ID: got[0].ID, ReceivedAt: got[0].ReceivedAt, MTI: "0200", ProcessingCode: "000000", STAN: sale[11],
		Transmission: sale[7], RRN: sale[37], TerminalID: term.TID, MerchantID: term.MID, Reference: sale[62], Amount: 1999,
		Currency: "124", EntryMode: "010", Condition: "59", CVV2: true, AU: "Y", PANFirst6: "424242", PANLast4: "4242",
		ResponseCode: "00", AuthCode: s[38], ApprovalDay: "2026-11-23", Status: acquirer.StatusProcessed}
	if got[0] != want {
		t.Errorf("journal entry\n%+v\nwant\n%+v", got[0], want)
	}
	if r := got[1]; r.ProcessingCode != "200000" || r.Original != acquirertest.Original(sale) || r.Amount != 999 || r.PANLast4 != "" {
		t.Errorf("journal entry of the refund: %+v", r)
	}
	if e := f.journal(stored[62]); len(e) != 1 || e[0].EntryMode != "100" || e[0].Condition != "02" || e[0].CVV2 || e[0].AU != "" {
		t.Errorf("journal entry of a stored-card recurring sale: %+v", e)
	}
	// The entries of a reference are found after a restart too: the index of references is rebuilt
	// from the journal.
	f.restart()
	if again := f.journal(sale[62]); !slices.Equal(again, got) {
		t.Errorf("journal after a restart:\n%+v\nwant\n%+v", again, got)
	}

	// Neither the PAN nor the CVV2 reaches the disk.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(f.dir, "*"))
	var all bytes.Buffer
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	if all.Len() == 0 {
		t.Fatal("no journal files")
	}
	cardtest.Check(t, "the data directory", all.String())
	if bytes.Contains(all.Bytes(), []byte(cvv)) {
		t.Error("the CVV2 is in the data directory")
	}
}

func TestManyInFlight(t *testing.T) {
	f := start(t)
	f.SetLatency(50 * time.Millisecond) // answers come back out of order
	term := acquirertest.Dial(t, f.Addr())
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			pan, code := cardtest.Visa, "00"
			if i%3 == 0 {
				pan, code = cardtest.InsufficientFunds, "51"
			}
			m := term.Purchase("0200", pan, int64(100+i))
			a := term.Send(t, m)
			if a[11] != m[11] || a[62] != m[62] || acquirertest.Amount(a) != int64(100+i) || a[39] != code {
				t.Errorf("request %s %s answered %v", m[11], m[62], a)
			}
		})
	}
	wg.Wait()
}

func TestJournalFailure(t *testing.T) {
	f := start(t)
	term := acquirertest.Dial(t, f.Addr())
	expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "00")
	f.BreakJournal()
	// What cannot be journaled is not answered, and nothing more is processed.
	if _, err := term.Exchange(term.Purchase("0200", cardtest.Visa, 1000), 500*time.Millisecond); !errors.Is(err, connection.ErrSendTimeout) {
		t.Fatalf("answered without a journal: %v", err)
	}
	expect(t, term, term.Purchase("0200", cardtest.Visa, 1000), "96")
	if status, _ := f.get("/healthz"); status != http.StatusServiceUnavailable {
		t.Errorf("GET /healthz: %d", status)
	}
}

func TestDataDirInUse(t *testing.T) {
	f := start(t)
	if _, err := acquirer.Start(acquirer.Config{Addr: "127.0.0.1:0", DataDir: f.dir}); !errors.Is(err, acquirer.ErrDataDirInUse) {
		t.Errorf("a second host on the data directory: %v", err)
	}
}

func TestUnreadableMessage(t *testing.T) {
	f := start(t)
	conn, err := net.Dial("tcp", f.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	garbage := "0800" + "Z000000000000000" + "1123120000" // the bitmap is not hexadecimal
	if _, err := conn.Write(append([]byte{0, byte(len(garbage))}, garbage...)); err != nil {
		t.Fatal(err)
	}
	// Not answered, and the connection goes on: an echo on it is answered.
	r := bufio.NewReader(conn)
	if a := roundTrip(t, conn, r, map[int]string{0: "0800", 7: "1123120000", 11: "000001", 24: "301"}); a != "00" {
		t.Errorf("echo answered %q", a)
	}
	// A request read together with one that does not unpack is answered all the same: the host reads
	// them in one go, and commits what it read before waiting for more.
	burst := append(frame(t, map[int]string{0: "0800", 7: "1123120000", 11: "000002", 24: "301"}), 0, byte(len(garbage)))
	if _, err := conn.Write(append(burst, garbage...)); err != nil {
		t.Fatal(err)
	}
	if a, err := readAnswer(r); err != nil || a != "00" {
		t.Errorf("echo sent with a message that does not unpack answered %q, %v", a, err)
	}
	if !strings.Contains(f.log.String(), "does not unpack") {
		t.Errorf("not logged:\n%s", f.log.String())
	}
}
