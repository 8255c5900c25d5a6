// Package securitytest is the standing regression suite of two outside security probes of Kassa: one
// black-box test per finding, named after the attack, that performs the attack as the probe did
// against a whole server running in-process (servertest) and asserts that it fails, with the answer a
// client sees. A change that reopens a finding fails the suite. The detailed tests of each fix stay in
// their own packages; these are the attacker's view.
//
// The tests run on SQLite only (no finding here is one of storage behaviour that differs by backend;
// the fixes' own tests cover both backends), each on a copy of one database migrated once per test
// binary. Those that measure the heap, or set the process's umask, do not run in parallel.
//
// The first probe (an anonymous attacker, a malicious merchant, a malicious partner):
//
//   - TestInvoiceOnlyPartnerCannotTakePayments: partner scopes are enforced on v1 keys and bearer tokens.
//   - TestWrongPasswordsCannotExhaustMemory: concurrent wrong passwords cannot exhaust memory (argon2id within one gate).
//   - TestParallelGuessesAreCountedBeforeChecking: a guess is counted before its password is checked, atomically.
//   - TestStrangersCannotLockTheMerchantOut: guesses by strangers cannot lock a merchant or its password grant out.
//   - TestAnotherKeysIdempotencyKeyReplaysNothing: idempotency records are scoped to the credential.
//   - TestIdempotencyRecordsHoldNoSecrets: idempotency records hold no card data, API key or page URL in clear.
//   - TestCardTestingIsThrottled: card testing is throttled per credential, per intent and per key's sessions.
//   - TestRevokedPartnersKeyStopsWorking: revoking a partner's client stops its API keys.
//   - TestCardTokenCannotBeChargedTwice: a CardEncryption token is single-use.
//   - TestPasswordGrantRefusesCredentialsInTheURL: the password grant refuses credentials in the query string.
//   - TestJSONAnswersAreNeverCached: every JSON answer carries Cache-Control: no-store.
//   - TestUnstorableTextIsRefused: NUL and invalid UTF-8 in a text field are refused naming the field.
//   - TestPartnerURLCannotAddCSPDirectives: a partner's URL enters a CSP header only rebuilt from its origin.
//   - TestBareAccountPrefixIsRefused: "payments-account: acct_" alone is refused as malformed.
//
// The second probe (the sign-in surfaces, secrets at rest, and smaller holes):
//
//   - TestPasswordAloneCannotEnrolANewFactor: the password of a user with a factor opens only the code step.
//   - TestConsentNeedsTheSecondFactor: the OAuth consent sign-in asks for the second factor.
//   - TestPasswordGrantCannotSkipTheSecondFactor: the password grant refuses a user with a second factor.
//   - TestPasswordChangesCannotExhaustMemory: password changes and set-password links hash within the gate.
//   - TestStolenSessionCannotGuessThePassword: wrong current passwords on the account page are counted.
//   - TestOutboxHoldsNoUsableLink: the outbox keeps no password link in clear.
//   - TestPayKeysAreNotStoredInClear: an invoice's pay key is not stored in clear.
//   - TestDataFilesArePrivate: the data directory is 0700 and the database files 0600.
//   - TestPayLinkGetsMakeNoSessions: GETs of a pay link share one session and are rate limited.
//   - TestWebhookLogShowsNoNetwork: the webhook delivery log shows no address or resolver.
//   - TestWebhookCannotReachIPv4InsideIPv6: the SSRF guard refuses IPv6 forms that embed a non-public IPv4.
//   - TestInvitationIsNoStaffOracle: an invitation answers alike whether the address is staff elsewhere or not.
//   - TestTerminalIsNoCustomerOracleForSales: the terminal tells sales staff nothing of which customers exist.
//   - TestSalesCannotMakeItsCardACustomersDefault: sales staff cannot save a card to an existing customer.
//   - TestInvitationDefaultsToTheLeastRole: an invitation defaults to the sales role.
//   - TestLastOwnerCannotBeRemoved: the last owner can be neither demoted nor removed.
//   - TestWrongSetUpCodeKeepsTheSecretShown: a wrong code during two-factor set-up keeps the secret shown.
//   - TestHTTPSKassaSendsHSTS: a Kassa on an https public URL sends Strict-Transport-Security.
package securitytest
