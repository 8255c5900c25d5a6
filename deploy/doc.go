// Package deploy holds the files that run Kassa in production — a sandboxed systemd unit
// (kassa.service) and a container image (Dockerfile) — and the tests that keep them working: the
// unit passes systemd-analyze, and the image builds the binary exactly as "make build" does.
package deploy
