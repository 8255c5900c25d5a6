// Package dashboard serves the merchant dashboard under /dashboard (issue 16): server-rendered pages
// for a merchant's staff, signed in with their e-mail and password.
package dashboard
