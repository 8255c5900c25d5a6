package deploy_test

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kassapay/kassa/internal/store/storetest"
)

// read returns a file of the repository, by its path from the root.
func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// makeRecipe is the recipe of target in makefile, one command a line, with $(VAR) expanded from
// the makefile's assignments and the overrides given ("VAR=value", as on make's command line).
func makeRecipe(makefile, target string, overrides ...string) ([]string, error) {
	vars := map[string]string{}
	assign := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)\s*[?:]?=\s*(.*)$`)
	var recipe []string
	in := false
	for line := range strings.Lines(makefile) {
		line = strings.TrimRight(line, "\n")
		if m := assign.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
		}
		switch {
		case strings.HasPrefix(line, target+":"):
			in = true
		case in && strings.HasPrefix(line, "\t"):
			recipe = append(recipe, strings.TrimSpace(line))
		case in:
			in = false
		}
	}
	if recipe == nil {
		return nil, fmt.Errorf("the Makefile has no target %q", target)
	}
	for _, o := range overrides {
		name, value, _ := strings.Cut(o, "=")
		vars[name] = value
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for i := range recipe {
		for ref.MatchString(recipe[i]) {
			recipe[i] = ref.ReplaceAllStringFunc(recipe[i], func(r string) string { return vars[ref.FindStringSubmatch(r)[1]] })
		}
		recipe[i] = strings.Join(strings.Fields(recipe[i]), " ")
	}
	return recipe, nil
}

// goBuildOf is the command of commands that builds output ("go build … -o output …"), or "".
func goBuildOf(commands []string, output string) string {
	for _, c := range commands {
		f := strings.Fields(c)
		if len(f) > 2 && f[0] == "go" && f[1] == "build" {
			if i := slices.Index(f, "-o"); i > 0 && i+1 < len(f) && filepath.Clean(f[i+1]) == filepath.Clean(output) {
				return c
			}
		}
	}
	return ""
}

// image is what a Dockerfile says about the kassa binary: the command its build stage builds it
// with (make targets expanded from the Makefile), that stage's environment, and the final stage's
// base image and user.
type image struct {
	build       string
	env         map[string]string
	base, user  string
	fromCommand []string // the build stage's commands, make targets expanded
}

// parseDockerfile reads dockerfile: the final stage copies the binary "--from" a build stage, whose
// WORKDIR, ENV and RUN lines say how it was built.
func parseDockerfile(dockerfile, makefile string) (image, error) {
	type stage struct {
		base, name, workdir, user string
		entrypoint                []string
		env                       map[string]string
		runs                      []string
		copies                    [][]string
	}
	var stages []*stage
	text := strings.ReplaceAll(dockerfile, "\\\n", " ")
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		instr, args := strings.ToUpper(f[0]), f[1:]
		if instr == "FROM" {
			s := &stage{base: args[0], env: map[string]string{}}
			if len(args) == 3 && strings.EqualFold(args[1], "AS") {
				s.name = args[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			return image{}, fmt.Errorf("%s before FROM", instr)
		}
		s := stages[len(stages)-1]
		switch instr {
		case "WORKDIR":
			s.workdir = args[0]
		case "USER":
			s.user = args[0]
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.Join(args, " ")), &s.entrypoint); err != nil || len(s.entrypoint) == 0 {
				return image{}, fmt.Errorf("ENTRYPOINT %s is not in exec form", strings.Join(args, " "))
			}
		case "ENV":
			for _, kv := range args {
				k, v, _ := strings.Cut(kv, "=")
				s.env[k] = v
			}
		case "RUN":
			s.runs = append(s.runs, strings.Join(args, " "))
		case "COPY":
			s.copies = append(s.copies, args)
		}
	}
	if len(stages) < 2 {
		return image{}, fmt.Errorf("not a multi-stage Dockerfile")
	}
	final := stages[len(stages)-1]
	img := image{base: final.base, user: final.user}
	if final.entrypoint == nil {
		return image{}, fmt.Errorf("the final stage has no ENTRYPOINT")
	}
	var from, src string
	for _, c := range final.copies {
		if len(c) >= 3 && strings.HasPrefix(c[0], "--from=") && c[len(c)-1] == final.entrypoint[0] {
			from, src = strings.TrimPrefix(c[0], "--from="), c[len(c)-2]
		}
	}
	i := slices.IndexFunc(stages, func(s *stage) bool { return s.name == from })
	if i < 0 {
		return image{}, fmt.Errorf("the final stage copies its ENTRYPOINT %s from no build stage", final.entrypoint[0])
	}
	build := stages[i]
	img.env = build.env
	var commands []string
	for _, run := range build.runs {
		for _, c := range strings.Split(run, "&&") {
			f := strings.Fields(c)
			for len(f) > 0 && strings.Contains(f[0], "=") { // VAR=value make …: the environment of one command
				k, v, _ := strings.Cut(f[0], "=")
				img.env[k] = v
				f = f[1:]
			}
			if len(f) > 1 && f[0] == "make" {
				recipe, err := makeRecipe(makefile, f[1], f[2:]...)
				if err != nil {
					return image{}, err
				}
				commands = append(commands, recipe...)
			} else {
				commands = append(commands, strings.Join(f, " "))
			}
		}
	}
	img.fromCommand = commands
	rel, err := filepath.Rel(build.workdir, src)
	if err != nil {
		return image{}, err
	}
	img.build = goBuildOf(commands, rel)
	return img, nil
}

// makeBuildCommand is the command "make build" builds bin/kassa with, with the overrides given
// ("VAR=value", as on make's command line).
func makeBuildCommand(t *testing.T, overrides ...string) string {
	t.Helper()
	recipe, err := makeRecipe(read(t, "Makefile"), "build", overrides...)
	if err != nil {
		t.Fatal(err)
	}
	cmd := goBuildOf(recipe, "bin/kassa")
	if cmd == "" {
		t.Fatalf("make build has no go build of bin/kassa: %q", recipe)
	}
	return cmd
}

// checkImage is every requirement on the image: the binary built by the same command as "make build",
// static (CGO_ENABLED=0), in a distroless static or scratch image, run as a numeric non-root user.
func checkImage(img image, makeBuild string) []string {
	var problems []string
	if img.build != makeBuild {
		problems = append(problems, fmt.Sprintf("the Dockerfile builds kassa with %q (of %q), make build with %q", img.build, img.fromCommand, makeBuild))
	}
	if img.env["CGO_ENABLED"] != "0" {
		problems = append(problems, "the build stage does not set CGO_ENABLED=0")
	}
	if !strings.HasPrefix(img.base, "gcr.io/distroless/static") && img.base != "scratch" {
		problems = append(problems, fmt.Sprintf("the final stage is %s, not distroless static or scratch", img.base))
	}
	uid, _, _ := strings.Cut(img.user, ":")
	if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid) {
		problems = append(problems, fmt.Sprintf("USER %q is not a numeric non-root user (Kubernetes' runAsNonRoot checks numbers)", img.user))
	}
	return problems
}

// The multi-stage Dockerfile produces a static, non-root image whose build command is the same go
// build that make build runs. Docker is not needed: the Dockerfile's build stage is
// read, its make targets expanded from the Makefile, and compared. The checker is shown to catch
// drifted Dockerfiles too.
func TestDockerfileBuildsAsMakeBuild(t *testing.T) {
	t.Parallel()
	makefile, dockerfile, want := read(t, "Makefile"), read(t, "deploy/Dockerfile"), makeBuildCommand(t)
	img, err := parseDockerfile(dockerfile, makefile)
	if err != nil {
		t.Fatal(err)
	}
	if problems := checkImage(img, want); problems != nil {
		t.Fatalf("deploy/Dockerfile:\n%s", strings.Join(problems, "\n"))
	}
	t.Logf("both build kassa with: %s", want)

	for name, edit := range map[string][2]string{
		"its own go build":  {"RUN make build", "RUN go build -trimpath -o bin/kassa ./cmd/kassa"},
		"other build flags": {"RUN make build", "RUN make build BUILD_FLAGS=-race"},
		"cgo":               {"ENV CGO_ENABLED=0", "ENV CGO_ENABLED=1"},
		"root":              {"USER 65532:65532", "USER root"},
		"a full base image": {"FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:12"},
	} {
		if !strings.Contains(dockerfile, edit[0]) {
			t.Fatalf("deploy/Dockerfile has no %q to change for the case %q", edit[0], name)
		}
		img, err := parseDockerfile(strings.Replace(dockerfile, edit[0], edit[1], 1), makefile)
		if err == nil && checkImage(img, want) == nil {
			t.Errorf("a Dockerfile with %s passes the check", name)
		}
	}
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildOut  []byte
)

// staticKassa builds ./cmd/kassa with "make build"'s command and CGO_ENABLED=0, as the image's build
// stage does, once per test run, into a temporary directory.
func staticKassa(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kassa-static-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "kassa")
		// VERSION, which make takes from git describe, is left empty, as in a checkout without tags:
		// makeRecipe expands variables, not make's functions.
		f := strings.Fields(makeBuildCommand(t, "VERSION="))
		f[slices.Index(f, "-o")+1] = binary
		cmd := exec.Command(f[0], f[1:]...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("CGO_ENABLED=0 %s: %v\n%s", makeBuildCommand(t, "VERSION="), buildErr, buildOut)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// "CGO_ENABLED=0 go build ./cmd/kassa" succeeds (the SQLite driver is pure Go), the binary links no
// shared library and needs no dynamic loader, as a distroless static or scratch image requires, and runs.
func TestStaticBuild(t *testing.T) {
	t.Parallel()
	bin := staticKassa(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries: %v", libs)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary needs a dynamic loader (PT_INTERP)")
		}
	}
	if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil {
		t.Fatalf("kassa version: %v\n%s", err, out)
	}
}

// unitSettings are the Key=value lines of a systemd unit, each key with its values in order.
func unitSettings(unit string) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// The systemd unit is sandboxed (DynamicUser, ProtectSystem=strict, StateDirectory,
// NoNewPrivileges, …) and passes systemd-analyze verify. The unit, with ExecStart pointed at a freshly
// built kassa, verifies without a word, its sandboxing is the list above, and systemd-analyze
// security rates its exposure 2.0 or less (of 10), and its data directory is its state directory.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		storetest.Unavailable(t, "systemd-analyze is not installed (Debian: apt-get install systemd)")
	}
	unit := read(t, "deploy/kassa.service")
	set := unitSettings(unit)
	for key, want := range map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "StateDirectory": "kassa", "NoNewPrivileges": "yes",
		"ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
		"MemoryDenyWriteExecute": "yes", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"SystemCallFilter": "@system-service", "Environment": "KASSA_DATA_DIR=/var/lib/kassa",
		"StateDirectoryMode": "0700", "UMask": "0077",
	} {
		if !slices.Contains(set[key], want) {
			t.Errorf("%s=%s: the unit has %q", key, want, set[key])
		}
	}
	exec0 := "ExecStart=/usr/local/bin/kassa "
	if !strings.Contains(unit, "\n"+exec0) {
		t.Fatalf("the unit has no %q line", exec0)
	}
	file := filepath.Join(t.TempDir(), "kassa.service")
	if err := os.WriteFile(file, []byte(strings.Replace(unit, exec0, "ExecStart="+staticKassa(t)+" ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// systemd-analyze verify exits 0 on unknown keys and bad values, which it only mentions.
	out, err := exec.Command(analyze, "verify", file).CombinedOutput()
	if err != nil || strings.Contains(string(out), "kassa.service") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=20", file).CombinedOutput()
	level := regexp.MustCompile(`Overall exposure level for kassa.service: ([0-9.]+)`).FindSubmatch(out)
	if err != nil || level == nil {
		t.Fatalf("systemd-analyze security: %v (the threshold is 2.0)\n%s", err, out)
	}
	t.Logf("systemd-analyze security: exposure %s of 10", level[1])
}

// The KASSA_… variables the unit and the image set or suggest are ones kassa reads.
func TestDeployVariables(t *testing.T) {
	t.Parallel()
	var source strings.Builder
	files, _ := filepath.Glob("../cmd/kassa/*.go")
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			source.WriteString(read(t, strings.TrimPrefix(f, "../")))
		}
	}
	for _, file := range []string{"deploy/kassa.service", "deploy/Dockerfile"} {
		for _, v := range regexp.MustCompile(`KASSA_[A-Z_]+`).FindAllString(read(t, file), -1) {
			if !strings.Contains(source.String(), `"`+v+`"`) {
				t.Errorf("%s names %s, which kassa does not read", file, v)
			}
		}
	}
}
