// Command kassa is the Kassa payment gateway: "kassa serve" runs the server, and the other
// subcommands are the operator's tools, which work on the same database while the server runs.
//
// Every operator command prints one JSON object on stdout. A failure prints a one-line reason on
// stderr and exits 1; flags that cannot be used exit 2.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	_ "time/tzdata" // billing calendars need every IANA zone, on hosts without a zoneinfo database too

	"github.com/kassapay/kassa/deploy"
	"github.com/kassapay/kassa/internal/envelope"
	"github.com/kassapay/kassa/internal/fault"
	"github.com/kassapay/kassa/internal/private"
	"github.com/kassapay/kassa/internal/processor"
	"github.com/kassapay/kassa/internal/processor/iso8583"
	"github.com/kassapay/kassa/internal/processor/stripe"
	"github.com/kassapay/kassa/internal/store"
)

func main() {
	os.Exit(run(os.Args[1:], connectors, os.Stdout, os.Stderr))
}

// connectors are the kinds of processor a merchant can be connected to beside the built-in
// simulator (which package accounts always has): what "kassa merchant update --processor" accepts.
// Each kind is one line here. Kinds hold what their accounts share (an ISO 8583 host's connection,
// the numbering of its messages in db); a command that only validates configurations may pass a nil
// logger.
func connectors(db *store.DB, log *slog.Logger) []processor.Kind {
	return []processor.Kind{
		iso8583.NewKind(iso8583.KindConfig{DB: db, Logger: log}),
		stripe.NewKind(stripe.KindConfig{Logger: log}),
	}
}

// connectorsFunc builds the connectors for a database and a logger (connectors, or a test's own).
type connectorsFunc func(db *store.DB, log *slog.Logger) []processor.Kind

const usage = `kassa: a self-hosted card payment gateway

Usage:
  kassa serve [--addr 127.0.0.1:8080] [--data-dir ./kassa-data | --database-url postgres://...] [--public-url URL] [--demo]
              [--tls-cert FILE --tls-key FILE]
  kassa migrate
  kassa merchant create --name NAME --email EMAIL [--password P] [--currency CAD]
  kassa merchant list
  kassa merchant show --merchant-id M
  kassa merchant update --merchant-id M [--simulator-profile standard|payfirma] [--currencies CAD,USD] [--max-amount 999999.99] [--timezone Zone]
                        [--locale Tag] [--processor simulator|iso8583|stripe [--processor-config FILE]]
  kassa user create --merchant-id M --email EMAIL --role owner|admin|reporting|sales [--public-url URL] [--smtp-url URL]
  kassa user list --merchant-id M
  kassa user reset-password --email EMAIL [--public-url URL] [--smtp-url URL]
  kassa merchant keys --merchant-id M
  kassa keys rotate --merchant-id M [--grace 168h]
  kassa keys rotate-vault --new-vault-key-file NEW
  kassa billing status
  kassa client create --merchant-id M [--validity 12h]
  kassa client list --merchant-id M
  kassa client revoke --client-id C
  kassa partner create --name NAME --image-url URL --callback-uri URI [--callback-uri URI ...] [--token-validity 20m]
  kassa partner list
  kassa merchant revoke-partner --merchant-id M --partner-id P
  kassa apikey create --account-id acct_... --permissions payment_intents:read,payment_intents:write,...
  kassa apikey list --account-id acct_...
  kassa apikey revoke --id key_...
  kassa webhook create --merchant-id M --url URL [--events type,type|*] [--description D]
  kassa webhook list --merchant-id M
  kassa webhook delete --merchant-id M --id we_...
  kassa reconcile --merchant-id M --date YYYY-MM-DD --report FILE
  kassa audit list --merchant-id M [--user U] [--operation OP] [--limit 50] [--before NEXT]
  kassa backup --out FILE
  kassa restore --from FILE [--data-dir NEW-EMPTY-DIR] [--vault-key-file FILE]

  kassa version

Shared flags, which every command takes (--init every command but serve, backup and restore):
  --data-dir DIR          the embedded SQLite database's directory (env KASSA_DATA_DIR; default ./kassa-data)
  --database-url URL      a PostgreSQL database instead, postgres://… (env KASSA_DATABASE_URL)
  --db-max-conns N        PostgreSQL connections for writes (default 16), or SQLite read connections (default 4)
  --vault-key-file FILE   the key-encryption key of secrets at rest (env KASSA_VAULT_KEY_FILE, or the key
                          itself in KASSA_VAULT_KEY)
  --init                  create the SQLite database when the data directory has none; without it, a
                          command other than serve and restore refuses, and says where it looked

Run "kassa GROUP --help" for a group's commands (kassa merchant --help), "kassa COMMAND --help" for a
command's flags (kassa merchant create --help).
`

// command is one subcommand: it registers its flags, and runs with the parsed flags.
type command struct {
	name  string
	setup func(fs *flag.FlagSet) func(ctx context.Context, env *env) error
}

// env is what a running command may use.
type env struct {
	stdout, stderr io.Writer
	db             dbFlags
	connectors     connectorsFunc
}

// note tells the operator something worth knowing on stderr, as slog's Info would take it.
func (e *env) note(msg string, args ...any) {
	fmt.Fprintln(e.stderr, append([]any{"kassa:", msg}, args...)...)
}

// usageError marks a failure of the command line itself: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func commands() []command {
	return []command{
		{"serve", serveCommand},
		{"migrate", migrateCommand},
		{"merchant create", merchantCreateCommand},
		{"merchant update", merchantUpdateCommand},
		{"merchant list", merchantListCommand},
		{"merchant show", merchantShowCommand},
		{"user create", userCreateCommand},
		{"user list", userListCommand},
		{"user reset-password", userResetPasswordCommand},
		{"merchant keys", merchantKeysCommand},
		{"keys rotate", keysRotateCommand},
		{"keys rotate-vault", keysRotateVaultCommand},
		{"billing status", billingStatusCommand},
		{"client create", clientCreateCommand},
		{"client list", clientListCommand},
		{"client revoke", clientRevokeCommand},
		{"partner create", partnerCreateCommand},
		{"partner list", partnerListCommand},
		{"merchant revoke-partner", merchantRevokePartnerCommand},
		{"apikey create", apikeyCreateCommand},
		{"apikey list", apikeyListCommand},
		{"apikey revoke", apikeyRevokeCommand},
		{"webhook create", webhookCreateCommand},
		{"webhook list", webhookListCommand},
		{"webhook delete", webhookDeleteCommand},
		{"reconcile", reconcileCommand},
		{"audit list", auditListCommand},
		{"backup", backupCommand},
		{"restore", restoreCommand},
	}
}

func run(args []string, kinds connectorsFunc, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if len(args) > 1 && args[0] == "docs" && args[1] == "flags" {
		return docsFlags(args[2:], stdout, stderr)
	}
	if args[0] == "version" || args[0] == "--version" || args[0] == "-version" {
		fmt.Fprintln(stdout, version())
		return 0
	}
	if lines := groupUsage(args[0]); lines != "" && (len(args) == 1 || isHelp(args[1])) {
		// "kassa merchant --help": the group's commands. "kassa merchant" alone is a command line
		// missing its command.
		out, code := stdout, 0
		if len(args) == 1 {
			out, code = stderr, 2
		}
		fmt.Fprintf(out, "kassa %s: the commands of the group\n\n%s\n%s", args[0], lines, sharedFlagsNote)
		return code
	}
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(args) < len(words) || strings.Join(args[:len(words)], " ") != c.name {
			continue
		}
		flags := flag.NewFlagSet("kassa "+c.name, flag.ContinueOnError)
		flags.SetOutput(stderr)
		helpOut := stderr // after a mistake on the command line
		if slices.ContainsFunc(args[len(words):], isHelp) {
			helpOut = stdout // asked for
		}
		flags.Usage = func() { commandUsage(helpOut, c.name, flags) }
		e := &env{stdout: stdout, stderr: stderr, connectors: kinds}
		e.db.register(flags)
		e.db.note = e.note
		if takesInit(c.name) {
			flags.BoolVar(&e.db.init, "init", false, initUsage)
		}
		runCmd := c.setup(flags)
		if err := flags.Parse(args[len(words):]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if flags.NArg() > 0 {
			fmt.Fprintf(stderr, "kassa %s: unexpected argument %q\n", c.name, flags.Arg(0))
			return 2
		}
		err := e.db.exists(c.name)
		if err == nil {
			err = runCmd(context.Background(), e)
		}
		if err == nil {
			return 0
		}
		fmt.Fprintf(stderr, "kassa %s: %s\n", c.name, oneLine(err))
		if errors.As(err, new(usageError)) {
			return 2
		}
		return 1
	}
	fmt.Fprintf(stderr, "kassa: unknown command %q\n\n%s", strings.Join(args, " "), usage)
	return 2
}

// takesInit reports whether a command takes --init: not serve, which creates its database anyway, nor
// restore, which puts a backup in its place, nor backup, which copies a database that must exist.
func takesInit(command string) bool {
	return command != "serve" && command != "backup" && command != "restore"
}

// initUsage describes --init, which every command but serve, backup and restore takes.
const initUsage = "create the SQLite database when the data directory has none"

// isHelp reports whether a word asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// sharedFlagsNote ends every help text: the flags every command takes, described once, in usage.
const sharedFlagsNote = "Every command also takes the shared flags --data-dir, --database-url, --db-max-conns,\n" +
	"--vault-key-file and (but serve, backup and restore) --init: \"kassa --help\" describes them.\n"

// usageLines are usage's lines of the commands whose names start with prefix, with their
// continuation lines.
func usageLines(prefix string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(usage, "\n") {
		switch {
		case strings.HasPrefix(line, "  kassa "):
			in = strings.HasPrefix(line, "  kassa "+prefix+" ") || line == "  kassa "+prefix
		case !strings.HasPrefix(line, "    "):
			in = false
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// groupUsage is the usage of the commands of a group ("merchant" for "kassa merchant create", …), or
// "" when name is not a group's.
func groupUsage(name string) string {
	for _, c := range commands() {
		if group, _, ok := strings.Cut(c.name, " "); ok && group == name {
			return usageLines(name)
		}
	}
	return ""
}

// commandUsage is a command's help: its line of usage, then its own flags, each written --flag as
// the README writes them, then a note on the shared flags.
func commandUsage(w io.Writer, name string, flags *flag.FlagSet) {
	fmt.Fprintf(w, "Usage:\n%s\nFlags:\n", usageLines(name))
	flags.VisitAll(func(f *flag.Flag) {
		if shared[f.Name] {
			return
		}
		value, text := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if value != "" {
			fmt.Fprintf(w, " %s", value)
		}
		fmt.Fprintf(w, "\n      %s", strings.ReplaceAll(text, "\n", "\n      "))
		if shown(f) {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
	fmt.Fprintf(w, "\n%s", sharedFlagsNote)
}

// buildVersion is the version make build names the binary with (-ldflags=-X=main.buildVersion=…):
// git describe's name for the commit it was built from. Empty in a build without it.
var buildVersion string

// version is what kassa version prints: "kassa VERSION (commit REVISION, GO)".
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return versionLine(buildVersion, bi, deploy.NewestRelease())
}

// versionLine is the version line of a binary named built by make build (or "") whose build
// information, as the Go toolchain recorded it, is bi (nil: none), built after the release newest.
// The version is, first found: built's; the module version the toolchain stamped (from the git tags of
// the checkout, with "+dirty" for local changes); else newest with "-dev", a development build of
// what follows that release. The commit, its time and whether the checkout had local changes come from
// the toolchain's VCS stamp, which a build from a git checkout has (not go run, nor a build with
// -buildvcs=false or in a git worktree, whose .git is a file the toolchain does not recognise).
func versionLine(built string, bi *debug.BuildInfo, newest string) string {
	v := built
	if v == "" && bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	if v == "" {
		if newest == "" {
			newest = "v0.0.0"
		}
		v = newest + "-dev"
	}
	var details []string
	if bi != nil {
		var revision, at string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if revision != "" {
			commit := "commit " + revision
			if at != "" {
				commit += " of " + at
			}
			if modified {
				commit += " with local changes"
			}
			details = append(details, commit)
		}
		details = append(details, bi.GoVersion)
	}
	if details == nil {
		return "kassa " + v
	}
	return "kassa " + v + " (" + strings.Join(details, ", ") + ")"
}

// oneLine is the error's message on one line; a *fault.Error shows only its message.
func oneLine(err error) string {
	var f *fault.Error
	msg := err.Error()
	if errors.As(err, &f) {
		msg = f.Message
	}
	return strings.Join(strings.Fields(msg), " ")
}

// dbFlags are the flags every command shares: where the database is.
type dbFlags struct {
	init         bool // --init: create the SQLite database when there is none
	dataDir      string
	databaseURL  string
	maxConns     int
	bounds       store.Bounds // PostgreSQL's bounds: kassa serve's flags; the defaults elsewhere
	vaultKeyFile string
	// note is told what opening the database changed in the data directory (store.Config.Note): the
	// command's stderr, or kassa serve's log.
	note func(msg string, args ...any)
}

// shared are the names of the flags every command takes (dbFlags).
var shared = map[string]bool{"data-dir": true, "database-url": true, "db-max-conns": true, "vault-key-file": true, "init": true}

func (d *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.dataDir, "data-dir", envOr("KASSA_DATA_DIR", "./kassa-data"), "directory of the embedded SQLite database (env KASSA_DATA_DIR)")
	fs.StringVar(&d.databaseURL, "database-url", os.Getenv("KASSA_DATABASE_URL"), "PostgreSQL URL; overrides --data-dir (env KASSA_DATABASE_URL)")
	fs.IntVar(&d.maxConns, "db-max-conns", 0, "PostgreSQL connections for writes (default 16), or SQLite read connections (default 4)")
	fs.StringVar(&d.vaultKeyFile, "vault-key-file", os.Getenv("KASSA_VAULT_KEY_FILE"),
		"file holding the key-encryption key for secrets at rest (env KASSA_VAULT_KEY_FILE; or the key itself in KASSA_VAULT_KEY)")
}

// exists refuses, for a command other than serve run from a directory without ./kassa-data, to
// create an empty database, and says where it looked (--init creates one on purpose). An operator's
// command run from the wrong directory would otherwise make a database of its own there, and its
// merchant or key would never reach the server. PostgreSQL's database is the operator's to create.
// restore makes its database from a backup, in a data directory that must have none.
func (d *dbFlags) exists(command string) error {
	if command == "serve" || command == "restore" || d.init || d.databaseURL != "" {
		return nil
	}
	path, err := d.sqlitePath()
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no Kassa database at %s: run kassa from the directory that holds the server's data directory, "+
			"or give it with --data-dir (or KASSA_DATA_DIR); --init creates a new, empty one there", path)
	}
	return nil
}

// sqlitePath is the absolute path of the SQLite database file in the data directory.
func (d *dbFlags) sqlitePath() (string, error) {
	return filepath.Abs(filepath.Join(d.dataDir, store.SQLiteFile))
}

// open opens and migrates the database.
func (d *dbFlags) open(ctx context.Context) (*store.DB, error) {
	db, err := store.Open(ctx, store.Config{DataDir: d.dataDir, DatabaseURL: d.databaseURL, MaxConns: d.maxConns, Bounds: d.bounds, Note: d.note})
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// kek loads the key-encryption key: KASSA_VAULT_KEY, else --vault-key-file, else (SQLite only) the
// file vault.key in the data directory, generated on first use. A generated key sits on the same disk
// as the database it protects; note is told so, to say it to the operator. It is information, not a
// warning: a generated key is what a first start on SQLite should do, and moving it is advice for
// production.
func (d *dbFlags) kek(note func(msg string, args ...any)) (*envelope.KEK, error) {
	if path := d.vaultKeyPath(); os.Getenv("KASSA_VAULT_KEY") == "" && path == d.defaultVaultKeyPath() {
		if d.databaseURL != "" {
			return nil, errors.New("PostgreSQL needs --vault-key-file or KASSA_VAULT_KEY: every node must use the same key-encryption key")
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			if err := store.DataDir(d.dataDir, d.note); err != nil {
				return nil, err
			}
			if err := private.WriteFile(path, []byte(envelope.NewKEKText()+"\n")); err != nil {
				return nil, fmt.Errorf("write a new key-encryption key: %w", err)
			}
			note("generated a key-encryption key next to the database, fine for trying Kassa out; in production keep it "+
				"on another disk or in a secret store and pass it with --vault-key-file or KASSA_VAULT_KEY", "path", path)
		}
	}
	return d.loadKEK()
}

// loadKEK loads the key-encryption key from KASSA_VAULT_KEY, else from its file (vaultKeyPath), and
// never generates one.
func (d *dbFlags) loadKEK() (*envelope.KEK, error) {
	if v := os.Getenv("KASSA_VAULT_KEY"); v != "" {
		return envelope.ParseKEK(v)
	}
	b, err := os.ReadFile(d.vaultKeyPath())
	if err != nil {
		return nil, fmt.Errorf("read the key-encryption key: %w", err)
	}
	return envelope.ParseKEK(string(b))
}

// vaultKeyPath is the file the key-encryption key is read from (when KASSA_VAULT_KEY is not set).
func (d *dbFlags) vaultKeyPath() string {
	if d.vaultKeyFile != "" {
		return d.vaultKeyFile
	}
	return d.defaultVaultKeyPath()
}

// defaultVaultKeyPath is where the embedded default keeps a generated key-encryption key.
func (d *dbFlags) defaultVaultKeyPath() string { return filepath.Join(d.dataDir, "vault.key") }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// printJSON writes v as one JSON object on its own line.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// required fails with a usage error when a required flag is empty.
func required(flags ...[2]string) error {
	for _, f := range flags {
		if strings.TrimSpace(f[1]) == "" {
			return usagef("--%s is required", f[0])
		}
	}
	return nil
}
