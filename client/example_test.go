package client_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/kassapay/kassa/client"
)

// A sale on the gateway API, authenticated as the merchant's OAuth client. The call carries no
// Idempotency-Key of the caller's: the client makes one for it, and its retries reuse it, so that a
// sale whose answer was lost is answered from the first attempt rather than charged again.
func Example_sale() {
	kassa, err := client.New(os.Getenv("KASSA_URL"),
		client.ClientCredentials(os.Getenv("KASSA_CLIENT_ID"), os.Getenv("KASSA_CLIENT_SECRET")))
	if err != nil {
		log.Fatal(err)
	}
	sale, err := kassa.SaleWithResponse(context.Background(), nil, client.ChargeRequest{
		Amount:          "59.99",
		Currency:        new("CAD"),
		CardNumber:      new("4242424242424242"),
		CardExpiryMonth: new("08"),
		CardExpiryYear:  new("30"),
		Cvv2:            new("123"),
		Email:           new("ada@example.com"),
	})
	if err != nil {
		log.Fatal(err)
	}
	if sale.JSON200 == nil {
		log.Fatalf("sale: %s %s", sale.Status(), sale.Body)
	}
	t := sale.JSON200
	fmt.Println(t.TransactionType, t.TransactionResult, t.Amount, t.Currency, t.CardType, t.CardSuffix)
	// Output: SALE APPROVED 59.99 CAD VISA 4242
}

// A refund of part of a sale, through the transaction service; the rest stays refundable.
func Example_refund() {
	ctx := context.Background()
	kassa, err := client.New(os.Getenv("KASSA_URL"),
		client.ClientCredentials(os.Getenv("KASSA_CLIENT_ID"), os.Getenv("KASSA_CLIENT_SECRET")))
	if err != nil {
		log.Fatal(err)
	}
	sale, err := kassa.SaleWithResponse(ctx, nil, client.ChargeRequest{
		Amount: "80.00", Currency: new("CAD"),
		CardNumber: new("5555555555554444"), CardExpiryMonth: new("12"), CardExpiryYear: new("2030"), Cvv2: new("123"),
	})
	if err != nil || sale.JSON200 == nil {
		log.Fatalf("sale: %v %s", err, sale.Body)
	}
	refund, err := kassa.RefundWithResponse(ctx, sale.JSON200.TransactionId, nil, client.FollowUpRequest{Amount: new("20.00")})
	if err != nil {
		log.Fatal(err)
	}
	if refund.JSON200 == nil {
		log.Fatalf("refund: %s %s", refund.Status(), refund.Body)
	}
	r := refund.JSON200
	fmt.Println(r.TransactionType, r.TransactionResult, r.Amount, r.Currency)
	fmt.Println("refunds the sale:", *r.OriginalTransactionId == sale.JSON200.TransactionId)
	// Output:
	// REFUND APPROVED 20.00 CAD
	// refunds the sale: true
}

// A customer in the vault, a card stored for it, and a payment with that card.
func Example_customerWithCard() {
	ctx := context.Background()
	kassa, err := client.New(os.Getenv("KASSA_URL"),
		client.ClientCredentials(os.Getenv("KASSA_CLIENT_ID"), os.Getenv("KASSA_CLIENT_SECRET")))
	if err != nil {
		log.Fatal(err)
	}
	created, err := kassa.CreateCustomerWithResponse(ctx, nil, client.CustomerFields{
		Email: new("grace@example.com"), FirstName: new("Grace"), LastName: new("Hopper"),
	})
	if err != nil || created.JSON200 == nil {
		log.Fatalf("customer: %v %s", err, created.Body)
	}
	customer := created.JSON200.LookupId

	// The card endpoint stores a card (card fields) or pays with the default card (an amount): the
	// body is one of the two.
	var card client.StoreCardOrPayRequest
	if err := card.FromStoredCardRequest(client.StoredCardRequest{
		CardNumber: new("5555555555554444"), CardExpiryMonth: new("12"), CardExpiryYear: new("2030"),
		CardDescription: new("work card"),
	}); err != nil {
		log.Fatal(err)
	}
	stored, err := kassa.StoreCardOrPayWithResponse(ctx, customer, nil, card)
	if err != nil || stored.JSON200 == nil {
		log.Fatalf("store card: %v %s", err, stored.Body)
	}
	withCard, err := stored.JSON200.AsCustomer()
	if err != nil {
		log.Fatal(err)
	}
	c := withCard.Cards[0]
	fmt.Println(len(withCard.Cards), c.CardType, c.CardPrefix, c.CardSuffix, c.CardExpiry, *c.CardDescription, c.IsDefault)

	paid, err := kassa.PayWithCardWithResponse(ctx, customer, c.LookupId, nil, client.StoredCardPayment{Amount: "25.00"})
	if err != nil || paid.JSON200 == nil {
		log.Fatalf("pay: %v %s", err, paid.Body)
	}
	fmt.Println(paid.JSON200.TransactionType, paid.JSON200.TransactionResult, paid.JSON200.Amount, paid.JSON200.Currency, paid.JSON200.CardSuffix)
	// Output:
	// 1 MASTERCARD 5555 4444 12/30 work card true
	// SALE APPROVED 25.00 CAD 4444
}

// A payment intent on the payments API v1, authenticated with an API key and the account it acts
// for: authorized when confirmed with a card, captured later. Amounts are integers in the currency's
// minor unit.
func Example_paymentIntent() {
	ctx := context.Background()
	kassa, err := client.New(os.Getenv("KASSA_URL"), client.APIKey(os.Getenv("KASSA_API_KEY"), os.Getenv("KASSA_ACCOUNT")))
	if err != nil {
		log.Fatal(err)
	}
	pm := client.PaymentMethodRequest{Type: "card", BillingDetails: &client.BillingDetails{Name: new("Ada Lovelace")}}
	pm.Card.Number, pm.Card.ExpMonth, pm.Card.ExpYear, pm.Card.Cvc = "4242424242424242", 12, 2030, new("123")
	method, err := kassa.CreatePaymentMethodWithResponse(ctx, nil, pm)
	if err != nil || method.JSON200 == nil {
		log.Fatalf("payment method: %v %s", err, method.Body)
	}
	fmt.Println(method.JSON200.Card.Brand, method.JSON200.Card.Last4)

	created, err := kassa.CreatePaymentIntentWithResponse(ctx, nil, client.CreatePaymentIntentJSONRequestBody{
		Amount: 5999, Currency: "cad", CaptureMethod: new(client.CreatePaymentIntentJSONBodyCaptureMethod("manual")),
		Metadata: &client.Metadata{"order_id": "1001"},
	})
	if err != nil || created.JSON200 == nil {
		log.Fatalf("payment intent: %v %s", err, created.Body)
	}
	intent := created.JSON200
	fmt.Println(intent.Status, intent.Amount, intent.Currency)

	confirmed, err := kassa.ConfirmPaymentIntentWithResponse(ctx, intent.Id, nil, client.ConfirmPaymentIntentJSONRequestBody{PaymentMethodId: &method.JSON200.Id})
	if err != nil || confirmed.JSON200 == nil {
		log.Fatalf("confirm: %v %s", err, confirmed.Body)
	}
	fmt.Println(confirmed.JSON200.Status, confirmed.JSON200.AmountCapturable)

	captured, err := kassa.CapturePaymentIntentWithResponse(ctx, intent.Id, nil, client.CapturePaymentIntentJSONRequestBody{})
	if err != nil || captured.JSON200 == nil {
		log.Fatalf("capture: %v %s", err, captured.Body)
	}
	fmt.Println(captured.JSON200.Status, captured.JSON200.AmountReceived)

	// Part of it back to the customer, through the payments API's refunds.
	refund, err := kassa.CreateRefundWithResponse(ctx, nil, client.CreateRefundJSONRequestBody{PaymentIntent: intent.Id, Amount: new(2000),
		Reason: new(client.CreateRefundJSONBodyReason("requested_by_customer"))})
	if err != nil || refund.JSON200 == nil {
		log.Fatalf("refund: %v %s", err, refund.Body)
	}
	fmt.Println(refund.JSON200.Object, refund.JSON200.Status, refund.JSON200.Amount, refund.JSON200.Charge == *captured.JSON200.LatestCharge)
	// Output:
	// visa 4242
	// requires_payment_method 5999 cad
	// requires_capture 5999
	// succeeded 5999
	// refund succeeded 2000 true
}
