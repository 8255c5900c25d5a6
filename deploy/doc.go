// Package deploy holds the files that run Kassa in production — a sandboxed systemd unit
// (kassa.service), a container image (Dockerfile), and in ha/ the highly available PostgreSQL
// cluster (Patroni, etcd, haproxy, pgBackRest and their systemd units), the list of releases (releases,
// whose newest names a development build in kassa version) — and the tests that keep them
// working: the units pass systemd-analyze, the image builds the binary exactly as "make build" does,
// and each of ha/'s files passes its own program's check.
package deploy
