package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// The configuration reference, docs/guides/configuration.md, is the flags of every command as the
// code defines them: "kassa docs flags" prints it, and with --write puts it into the page between its
// markers. TestConfigurationReferenceIsCurrent fails while the page says otherwise.
//
//go:generate go run . docs flags --write ../../docs/guides/configuration.md

// The markers between which the page holds the generated reference: the line that begins with
// flagsBegin (the rest of it is the page's to say), and flagsEnd.
const (
	flagsBegin = "<!-- flags:begin"
	flagsEnd   = "<!-- flags:end -->"
)

// docsFlags is "kassa docs flags [--write FILE]", a command for the documentation that the usage does
// not list. The defaults it shows are those without any KASSA_ variable set, whatever the environment
// it runs in, so that the page is the same wherever it is made.
func docsFlags(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kassa docs flags", flag.ContinueOnError)
	fs.SetOutput(stderr)
	write := fs.String("write", "", "put the reference into this Markdown file, between its markers, instead of printing it")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return 2
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "KASSA_") {
			os.Unsetenv(name)
		}
	}
	ref := flagReference()
	if *write == "" {
		fmt.Fprint(stdout, ref)
		return 0
	}
	page, err := os.ReadFile(*write)
	if err == nil {
		page, err = withReference(page, ref)
	}
	if err == nil {
		err = os.WriteFile(*write, page, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kassa docs flags: %v\n", err)
		return 1
	}
	return 0
}

// withReference is page with what lies between its markers replaced by ref.
func withReference(page []byte, ref string) ([]byte, error) {
	before, rest, begun := bytes.Cut(page, []byte(flagsBegin))
	marker, rest, _ := bytes.Cut(rest, []byte("\n"))
	_, after, ended := bytes.Cut(rest, []byte(flagsEnd))
	if !begun || !ended {
		return nil, errors.New("the page has no " + flagsBegin + " … --> line followed by " + flagsEnd + ": the markers between which the reference goes")
	}
	return []byte(string(before) + flagsBegin + string(marker) + "\n" + ref + flagsEnd + string(after)), nil
}

// flagReference is the Markdown of every flag of every command: the shared flags once, then each
// command's own, in the order of commands(), each flag with its default, its environment variables
// and what it does. The defaults are those of the process's environment: callers clear the KASSA_
// variables first.
func flagReference() string {
	var b strings.Builder
	shared := flag.NewFlagSet("shared", flag.ContinueOnError)
	new(dbFlags).register(shared)
	shared.Bool("init", false, initUsage)
	b.WriteString("### Shared flags\n\nEvery command takes these, but `--init`, which `serve`, `backup` and `restore` do not take.\n\n")
	flagTable(&b, shared)
	for _, c := range commands() {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		fmt.Fprintf(&b, "\n### kassa %s\n\n", c.name)
		flagTable(&b, fs)
	}
	return b.String()
}

// envName finds the environment variables a flag's usage names; envNote is the "(env …)" note that
// names them, which the table shows in a column of its own.
var (
	envName = regexp.MustCompile(`KASSA_[A-Z_]+(?:=1)?`)
	envNote = regexp.MustCompile(`\s*\(env KASSA_[A-Z_]+(?:=1)?(?:; ([^)]*))?\)`)
)

// flagTable writes a table of fs's flags but the shared ones (all of them for the shared set itself),
// or says that there are none.
func flagTable(b *strings.Builder, fs *flag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *flag.Flag) {
		if shared[f.Name] && fs.Name() != "shared" {
			return
		}
		value, usage := flag.UnquoteUsage(f)
		name := "`--" + f.Name
		if value != "" {
			name += " " + value
		}
		def := ""
		if shown(f) {
			def = "`" + f.DefValue + "`"
		}
		envs := envName.FindAllString(usage, -1)
		for i, e := range envs {
			envs[i] = "`" + e + "`"
		}
		usage = envNote.ReplaceAllStringFunc(usage, func(note string) string {
			if rest := envNote.FindStringSubmatch(note)[1]; rest != "" {
				return " (" + rest + ")"
			}
			return ""
		})
		usage = strings.ReplaceAll(strings.ReplaceAll(usage, "\n", " "), "|", `\|`)
		rows = append(rows, fmt.Sprintf("| %s` | %s | %s | %s |\n", name, def, strings.Join(envs, ", "), usage))
	})
	if len(rows) == 0 {
		b.WriteString("No flags of its own.\n")
		return
	}
	b.WriteString("| flag | default | environment | what it does |\n|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString(r)
	}
}

// shown reports whether a flag's default says something: not the zero value of its type, which the
// flag's usage explains when it stands for a default of its own (--db-max-conns 0: the backend's).
func shown(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s", "[]":
		return false
	}
	return true
}
