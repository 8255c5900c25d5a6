package main_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kassapay/kassa/internal/acquirer"
	"github.com/kassapay/kassa/internal/card/cardtest"
)

// A merchant on the iso8583 processor takes payments through "kassa serve" and kassa-acquirer: a
// sale, an authorization and its capture, partial refunds of both, a void, a card verification and
// every decline class of the profile's test cards. Each is checked as the transaction says it and as
// the host's journal received it, and "kassa reconcile" against the host's settlement report matches
// every operation. A sale in test mode goes to the simulator instead.
func TestISO8583Payments(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			shop := newISOShop(t, backend, "TERM0001", "5s")
			host := shop.host
			// want checks a transaction and the one message the host received for it, which names in
			// field 90 the message of (for a follow-up; nil otherwise). It returns the message.
			want := func(tx map[string]any, of *acquirer.Entry, kind, amount, result, mti, processing string, minor int64, code string) acquirer.Entry {
				t.Helper()
				if tx["transaction_type"] != kind || fmt.Sprintf("%.2f", tx["amount"]) != amount || tx["transaction_result"] != result || tx["test_mode"] != false {
					t.Fatalf("%s: %v", kind, tx)
				}
				e := host.sent(t, tx)
				if e.MTI != mti || e.ProcessingCode != processing || e.Amount != minor || e.Currency != "124" || e.ResponseCode != code ||
					e.TerminalID != "TERM0001" || e.MerchantID != "SHOP000TERM0001" || (of != nil) != (e.Original != "") ||
					of != nil && !strings.HasPrefix(e.Original, names(*of)) {
					t.Fatalf("%s: the host received %+v", kind, e)
				}
				return e
			}

			sale := shop.pay(t, "/transaction-service/sale", keyedCard(cardtest.Visa, "19.99"))
			s := want(sale, nil, "SALE", "19.99", "APPROVED", "0200", "000000", 1999, "00")
			if s.EntryMode != "010" || s.Condition != "59" || !s.CVV2 || s.PANLast4 != "4242" || len(s.AuthCode) != 6 {
				t.Fatalf("a keyed sale was sent as %+v", s)
			}
			for _, part := range []struct {
				amount string
				minor  int64
			}{{"5.00", 500}, {"14.99", 1499}} {
				refund := shop.pay(t, "/transaction-service/refund/"+sale["transaction_id"].(string), `{"amount":"`+part.amount+`"}`)
				if r := want(refund, &s, "REFUND", part.amount, "APPROVED", "0200", "200000", part.minor, "00"); r.PANLast4 != "" {
					t.Fatalf("a refund carried the card: %+v", r)
				}
			}
			if resp, body := getJSON(t, "POST", shop.srv.url+"/transaction-service/refund/"+sale["transaction_id"].(string), strings.NewReader(`{"amount":"0.01"}`),
				map[string]string{"Authorization": "Bearer " + shop.tok}); resp.StatusCode != http.StatusConflict {
				t.Fatalf("a refund beyond the sale: %d %v", resp.StatusCode, body)
			}

			auth := shop.pay(t, "/transaction-service/authorize", keyedCard(cardtest.Mastercard, "50.00"))
			a := want(auth, nil, "AUTHORIZATION", "50.00", "APPROVED", "0100", "000000", 5000, "00")
			capture := shop.pay(t, "/transaction-service/capture/"+auth["transaction_id"].(string), `{"amount":"30.00"}`)
			c := want(capture, &a, "CAPTURE", "30.00", "APPROVED", "0220", "000000", 3000, "00")
			refund := shop.pay(t, "/transaction-service/refund/"+capture["transaction_id"].(string), `{"amount":"10.00"}`)
			want(refund, &c, "REFUND", "10.00", "APPROVED", "0200", "200000", 1000, "00")

			hold := shop.pay(t, "/transaction-service/authorize", keyedCard(cardtest.Visa2, "10.00"))
			h := want(hold, nil, "AUTHORIZATION", "10.00", "APPROVED", "0100", "000000", 1000, "00")
			void := shop.pay(t, "/transaction-service/void/"+hold["transaction_id"].(string), `{}`)
			want(void, &h, "VOID", "10.00", "APPROVED", "0400", "", 1000, "00")
			if j := host.journal(t, hold["transaction_id"].(string)); !j[0].Reversed {
				t.Fatalf("the voided authorization is not reversed at the host: %+v", j[0])
			}

			verify := shop.pay(t, "/transaction-service/authorize", keyedCard(cardtest.Visa, "0"))
			want(verify, nil, "AUTHORIZATION", "0.00", "APPROVED", "0100", "000000", 0, "00")

			// A request in test mode goes to the simulator whatever the merchant's processor: nothing
			// reaches the host, and reconciliation leaves it out.
			test := shop.pay(t, "/transaction-service/sale", strings.Replace(keyedCard(cardtest.Visa, "7.00"), "{", `{"test_mode":true,`, 1))
			if j := host.journal(t, test["transaction_id"].(string)); test["transaction_result"] != "APPROVED" || test["test_mode"] != true || len(j) != 0 {
				t.Fatalf("a sale in test mode: %v, at the host %+v", test, j)
			}

			// Every decline class: the profile's response code on the wire, Kassa's decline code in
			// the transaction.
			for _, d := range []struct {
				kind, path, card, expiry, code, decline string
			}{
				{"SALE", "sale", cardtest.Declined, "", "05", "card_declined"},
				{"SALE", "sale", cardtest.InsufficientFunds, "", "51", "insufficient_funds"},
				{"AUTHORIZATION", "authorize", cardtest.InsufficientFunds, "", "51", "insufficient_funds"},
				{"SALE", "sale", cardtest.ExpiredCard, "", "54", "expired_card"},
				{"SALE", "sale", cardtest.Visa, "2020", "54", "expired_card"},
				{"SALE", "sale", cardtest.IncorrectCVC, "", "N7", "incorrect_cvc"},
				{"SALE", "sale", cardtest.LostCard, "", "41", "lost_card"},
				{"SALE", "sale", cardtest.StolenCard, "", "43", "stolen_card"},
				{"SALE", "sale", cardtest.ProcessingError, "", "96", "processing_error"},
			} {
				body := keyedCard(d.card, "12.00")
				if d.expiry != "" {
					body = strings.Replace(body, "2030", d.expiry, 1)
				}
				tx := shop.pay(t, "/transaction-service/"+d.path, body)
				e := want(tx, nil, d.kind, "12.00", "DECLINED", map[string]string{"SALE": "0200", "AUTHORIZATION": "0100"}[d.kind], "000000", 1200, d.code)
				if tx["decline_code"] != d.decline || tx["transaction_success"] != false || e.AuthCode != "" {
					t.Fatalf("%s answered %s: %v", d.card, d.code, tx)
				}
			}

			// The sale and its refunds, the authorization, its capture and the capture's refund, the
			// voided authorization and the card verification; declines are in effect nowhere.
			out := shop.reconcile(t, 8)
			if total := out["kassa_total"].(map[string]any)["CAD"]; total != float64(1999-500-1499+3000-1000) {
				t.Fatalf("net total %v", out["kassa_total"])
			}
		})
	}
}

// A stored card's payments (customer service, and the transaction service's stored-card routes) go to
// the host as card on file (field 22 "100") without a CVV2, and a subscription's charge made by the
// billing engine as recurring (field 25 "02"), where a keyed sale is "010", "59" with its CVV2.
func TestISO8583StoredCardsAndSubscriptions(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			shop := newISOShop(t, backend, "TERM0002", "5s", "--billing-interval", "100ms")
			// sent checks the entry mode, condition and CVV2 of the one message the host received for tx.
			sent := func(tx map[string]any, mti, mode, condition string, cvv2 bool) {
				t.Helper()
				if tx["transaction_result"] != "APPROVED" {
					t.Fatalf("%v", tx)
				}
				if e := shop.host.sent(t, tx); e.MTI != mti || e.EntryMode != mode || e.Condition != condition || e.CVV2 != cvv2 || e.PANLast4 != "4444" {
					t.Fatalf("a %s %s was sent as %s, entry mode %q, condition %q, CVV2 %v", tx["transaction_source"], tx["transaction_type"],
						e.MTI, e.EntryMode, e.Condition, e.CVV2)
				}
			}

			c, card := shop.customer(t, cardtest.Mastercard)
			sent(shop.pay(t, "/customer-service/customer/"+c+"/card", `{"amount":"12.50","currency":"CAD"}`), "0200", "100", "59", false)
			sent(shop.pay(t, "/customer-service/customer/"+c+"/card/"+card, `{"amount":"3.00","currency":"CAD"}`), "0200", "100", "59", false)
			sent(shop.pay(t, "/transaction-service/authorize/customer/"+c+"/card/"+card, `{"amount":"7.00","currency":"CAD"}`), "0100", "100", "59", false)
			sent(shop.pay(t, "/transaction-service/sale", keyedCard(cardtest.Mastercard, "4.00")), "0200", "010", "59", true)

			shop.subscribe(t, c)
			var charges []map[string]any
			eventually(t, "the subscription's first charge", 20*time.Second, func() bool {
				charges = shop.charges(t)
				return len(charges) > 0
			})
			sent(charges[0], "0200", "100", "02", false)

			shop.reconcile(t, 5)
		})
	}
}

// The v1 payments API and the hosted payment page pay through the merchant's acquirer: a payment
// intent confirmed with a payment method (authorized, captured in part), one declined, one canceled
// (a void), and a hosted page's session paid after a declined try. The host's journal has each
// charge, reconciliation matches.
func TestISO8583PaymentIntentsAndHostedPage(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			shop := newISOShop(t, backend, "TERM0003", "5s")
			host, srv := shop.host, shop.srv
			account := shop.m["account_id"].(string)
			key := cliJSON(t, append([]string{"apikey", "create", "--account-id", account, "--permissions", allPermissions}, shop.dbFlags...)...)["key"].(string)
			v1 := func(path, body string) map[string]any {
				t.Helper()
				resp, out := getJSON(t, "POST", srv.url+path, strings.NewReader(body),
					map[string]string{"payments-api-key": key, "payments-account": account, "Content-Type": "application/json"})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
				}
				return out
			}
			method := func(number string) string {
				return v1("/v1/payment-methods", `{"type":"card","card":{"number":"`+number+`","exp_month":12,"exp_year":2030,"cvc":"123"}}`)["id"].(string)
			}
			// charge is the one message the host received for the intent's latest charge.
			charge := func(in map[string]any, status string) acquirer.Entry {
				t.Helper()
				if in["status"] != status || in["livemode"] != true {
					t.Fatalf("intent %v, want %s and livemode (a live account)", in, status)
				}
				return host.sent(t, map[string]any{"transaction_type": in["status"], "transaction_id": in["latest_charge"]})
			}

			in := v1("/v1/payment-intents", `{"amount":5999,"currency":"cad","capture_method":"manual"}`)
			id := in["id"].(string)
			// A payment method's CVC is checked and dropped (docs/design/checkout.md, "Payment methods pay
			// once, and keep no CVC"): a confirmation that names one sends no CVV2.
			auth := charge(v1("/v1/payment-intents/"+id+"/confirm", `{"payment_method_id":"`+method(cardtest.Visa)+`"}`), "requires_capture")
			if auth.MTI != "0100" || auth.Amount != 5999 || auth.EntryMode != "010" || auth.Condition != "59" || auth.CVV2 || auth.ResponseCode != "00" {
				t.Fatalf("the confirmation was sent as %+v", auth)
			}
			// A capture and a void are transactions of their own, acting on the confirmation's; a
			// captured intent's latest_charge is its capture, a canceled one's its authorization.
			followUp := func(kind string, in map[string]any) acquirer.Entry {
				t.Helper()
				for _, tx := range shop.get(t, "/transaction-service/transaction?limit=100")["entities"].([]any) {
					if tx := tx.(map[string]any); tx["transaction_type"] == kind &&
						(tx["transaction_id"] == in["latest_charge"] || tx["original_transaction_id"] == in["latest_charge"]) {
						return host.sent(t, tx)
					}
				}
				t.Fatalf("no %s of %v in the ledger", kind, in["latest_charge"])
				return acquirer.Entry{}
			}
			in = v1("/v1/payment-intents/"+id+"/capture", `{"amount_to_capture":4000}`)
			if capture := followUp("CAPTURE", in); in["status"] != "succeeded" || in["amount_received"] != float64(4000) ||
				capture.MTI != "0220" || capture.Amount != 4000 || !strings.HasPrefix(capture.Original, names(auth)) || capture.ResponseCode != "00" {
				t.Fatalf("the capture of %v was sent as %+v", in, capture)
			}

			declined := v1("/v1/payment-intents", `{"amount":1500,"currency":"cad"}`)["id"].(string)
			in = v1("/v1/payment-intents/"+declined+"/confirm", `{"payment_method_id":"`+method(cardtest.InsufficientFunds)+`"}`)
			if e := charge(in, "requires_payment_method"); e.MTI != "0200" || e.ResponseCode != "51" ||
				in["last_payment_error"].(map[string]any)["decline_code"] != "insufficient_funds" {
				t.Fatalf("a declined confirmation: %v, sent as %+v", in, e)
			}

			canceled := v1("/v1/payment-intents", `{"amount":2000,"currency":"cad","capture_method":"manual"}`)["id"].(string)
			held := charge(v1("/v1/payment-intents/"+canceled+"/confirm", `{"payment_method_id":"`+method(cardtest.Mastercard)+`"}`), "requires_capture")
			in = v1("/v1/payment-intents/"+canceled+"/cancel", `{}`)
			if void := followUp("VOID", in); in["status"] != "canceled" || void.MTI != "0400" || void.Amount != 2000 ||
				!strings.HasPrefix(void.Original, names(held)) || void.ResponseCode != "00" {
				t.Fatalf("the cancel of %v was sent as %+v", in, void)
			}

			session := v1("/v1/checkout/hosted-payment-page/sessions", `{"amount":2599,"currency":"cad","capture_method":"automatic"}`)
			page := func(number string) map[string]any {
				t.Helper()
				resp, out := getJSON(t, "POST", session["url"].(string)+"/pay", strings.NewReader(`{"type":"card","card":{"number":"`+number+
					`","exp_month":12,"exp_year":2030,"cvc":"123"},"billing_details":{"name":"Ada Lovelace"}}`), map[string]string{"Content-Type": "application/json"})
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("the hosted page's pay: %d %v", resp.StatusCode, out)
				}
				return out
			}
			if out := page(cardtest.StolenCard); out["outcome"] != "failed" ||
				charge(out["payment_intent"].(map[string]any), "requires_payment_method").ResponseCode != "43" ||
				out["payment_intent"].(map[string]any)["last_payment_error"].(map[string]any)["decline_code"] != "stolen_card" {
				t.Fatalf("a declined card on the hosted page: %v", out)
			}
			// The hosted page collects the card and confirms in one request: its CVV2 goes to the host.
			out := page(cardtest.Visa)
			sale := charge(out["payment_intent"].(map[string]any), "succeeded")
			if out["outcome"] != "completed" || sale.MTI != "0200" || sale.Amount != 2599 || sale.EntryMode != "010" || sale.Condition != "59" || !sale.CVV2 {
				t.Fatalf("the hosted page's payment %v was sent as %+v", out, sale)
			}
			tx := shop.get(t, "/transaction-service/transaction/lookup/"+out["payment_intent"].(map[string]any)["latest_charge"].(string))
			if tx["transaction_source"] != "HPP" || tx["test_mode"] != false {
				t.Fatalf("the hosted page's payment in the ledger: %v", tx)
			}

			// The authorization and its capture, the voided authorization, the hosted page's sale.
			shop.reconcile(t, 4)
		})
	}
}
