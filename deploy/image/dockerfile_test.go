// Package image checks the repository's Dockerfile without a container
// engine: it is parsed with BuildKit's own parser and must build with
// `make build`, static, and ship exactly the binaries the Makefile makes.
package image

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

const root = "../.."

// spec is what the Dockerfile must satisfy besides parsing.
type spec struct {
	binaries  []string // what `make build` writes to $(BIN)
	goVersion string   // major.minor of go.mod's go line
}

// wantLabels are the OCI labels the final stage sets; "" means any non-empty value.
var wantLabels = map[string]string{
	"org.opencontainers.image.title":       "",
	"org.opencontainers.image.description": "",
	"org.opencontainers.image.source":      "",
	"org.opencontainers.image.version":     "${VERSION}",
	"org.opencontainers.image.licenses":    "Apache-2.0",
	"org.opencontainers.image.vendor":      "infradns",
}

// wantPackages are installed in the final stage: keepalived and haproxy run
// from this image and lbconfig validates with them; lbconfig runs nft for
// the hand-over relay.
var wantPackages = []string{"keepalived", "haproxy", "iproute2", "nftables", "ca-certificates", "libcap2-bin"}

// checkDockerfile returns every problem found in the Dockerfile text df;
// none means it is good.
func checkDockerfile(df []byte, s spec) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	res, err := parser.Parse(bytes.NewReader(df))
	if err != nil {
		return []string{"parse: " + err.Error()}
	}
	for _, w := range res.Warnings {
		bad("parser warning (treated as an error): %s", w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, loc []parser.Range) {
		bad("lint %s (treated as an error): %s", rule, msg)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		return append(problems, "instructions: "+err.Error())
	}
	if len(stages) < 2 {
		return append(problems, fmt.Sprintf("%d stage(s), want a build stage and a final stage", len(stages)))
	}
	if !slices.ContainsFunc(metaArgs, func(a instructions.ArgCommand) bool {
		return slices.ContainsFunc(a.Args, func(kv instructions.KeyValuePairOptional) bool { return kv.Key == "VERSION" })
	}) {
		bad("no global ARG VERSION before the first FROM")
	}

	// The build stage.
	bi := slices.IndexFunc(stages, func(st instructions.Stage) bool { return st.Name == "build" })
	if bi < 0 {
		return append(problems, "no stage named build")
	}
	build := stages[bi]
	if want := "golang:" + s.goVersion + "-bookworm"; build.BaseName != want {
		bad("build stage FROM %s, want %s (go.mod's go %s)", build.BaseName, want, s.goVersion)
	}
	workdir, binDir := "/", "bin" // where make build writes: $(WORKDIR)/$(BIN)
	var modsCopied, modsDownloaded, srcCopied, built, versionArg bool
	for _, c := range build.Commands {
		switch c := c.(type) {
		case *instructions.WorkdirCommand:
			workdir = path.Join(workdir, c.Path)
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				versionArg = versionArg || kv.Key == "VERSION"
			}
		case *instructions.CopyCommand:
			switch {
			case slices.Equal(c.SourcePaths, []string{"go.mod", "go.sum"}):
				modsCopied = true
			case slices.Equal(c.SourcePaths, []string{"."}):
				if !modsDownloaded {
					bad("COPY . comes before `go mod download`: the module layer is rebuilt on every change")
				}
				srcCopied = true
			}
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if strings.Contains(line, "go mod download") {
				if !modsCopied {
					bad("`go mod download` runs before go.mod and go.sum are copied")
				}
				modsDownloaded = true
			}
			if regexp.MustCompile(`\bmake\s+build\b`).MatchString(line) {
				built = true
				if !srcCopied {
					bad("make build runs before the source is copied")
				}
				if !regexp.MustCompile(`(^|\s)CGO_ENABLED=0\s`).MatchString(line) {
					bad("make build runs without CGO_ENABLED=0: %q", line)
				}
				if !strings.Contains(line, "VERSION=") || !versionArg {
					bad("make build does not get the VERSION build-arg (ARG VERSION, make build VERSION=...): %q", line)
				}
				if m := regexp.MustCompile(`\bBIN=(\S+)`).FindStringSubmatch(line); m != nil {
					binDir = m[1]
				}
				if !path.IsAbs(binDir) {
					binDir = path.Join(workdir, binDir)
				}
			}
		}
	}
	if !modsCopied || !modsDownloaded {
		bad("build stage does not COPY go.mod go.sum and RUN go mod download first")
	}
	if !built {
		bad("build stage never runs make build")
	}

	// The final stage.
	final := stages[len(stages)-1]
	if final.BaseName != "debian:bookworm-slim" {
		bad("final stage FROM %s, want debian:bookworm-slim", final.BaseName)
	}
	var copied []string
	labels := map[string]string{}
	var user string
	var entrypoint, cmd *instructions.ShellDependantCmdLine
	installed := map[string]bool{}
	finalVersionArg := false
	// The DNS pod runs coredns as non-root: the file capability must be set
	// after the binary is copied in.
	copiedCoreDNS, capSet := false, false
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				finalVersionArg = finalVersionArg || kv.Key == "VERSION"
			}
		case *instructions.CopyCommand:
			if c.From != "build" {
				continue
			}
			if c.DestPath != "/usr/bin/" {
				bad("COPY --from=build to %s, want /usr/bin/", c.DestPath)
			}
			for _, p := range c.SourcePaths {
				if dir := path.Dir(p); dir != binDir {
					bad("COPY --from=build %s: not in %s, where make build writes", p, binDir)
				}
				copied = append(copied, path.Base(p))
				copiedCoreDNS = copiedCoreDNS || path.Base(p) == "coredns"
			}
		case *instructions.LabelCommand:
			for _, kv := range c.Labels {
				labels[kv.Key] = strings.Trim(kv.Value, `"`)
			}
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			entrypoint = &c.ShellDependantCmdLine
		case *instructions.CmdCommand:
			cmd = &c.ShellDependantCmdLine
		case *instructions.RunCommand:
			line := strings.Join(c.CmdLine, " ")
			if copiedCoreDNS && strings.Contains(line, "setcap cap_net_bind_service=+ep /usr/bin/coredns") {
				capSet = true
			}
			for _, part := range strings.Split(line, "&&") {
				f := strings.Fields(part)
				if len(f) < 2 || f[0] != "apt-get" || !slices.Contains(f, "install") {
					continue
				}
				if !slices.Contains(f, "--no-install-recommends") {
					bad("apt-get install without --no-install-recommends: %q", strings.TrimSpace(part))
				}
				for _, p := range f[2:] {
					installed[p] = true
				}
			}
		}
	}
	for _, b := range s.binaries {
		if !slices.Contains(copied, b) {
			bad("binary %s is built by make build but not copied --from=build into the image", b)
		}
	}
	for _, b := range copied {
		if !slices.Contains(s.binaries, b) {
			bad("COPY --from=build %s: make build does not make it", b)
		}
	}
	for _, b := range copied {
		if n := countOf(copied, b); n > 1 {
			bad("binary %s copied %d times", b, n)
			break
		}
	}
	for k, want := range wantLabels {
		got, ok := labels[k]
		switch {
		case !ok || got == "":
			bad("final stage has no LABEL %s", k)
		case want != "" && got != want:
			bad("LABEL %s=%q, want %q", k, got, want)
		}
	}
	if !capSet {
		bad("final stage does not setcap cap_net_bind_service=+ep /usr/bin/coredns after copying it: the non-root DNS pod could not bind port 53")
	}
	if !finalVersionArg {
		bad("final stage has no ARG VERSION: the version label would be empty")
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		bad("final stage USER %q: want a non-root default user", user)
	}
	for _, p := range wantPackages {
		if !installed[p] {
			bad("final stage does not apt-get install %s", p)
		}
	}
	if entrypoint == nil || entrypoint.PrependShell || !slices.Equal(entrypoint.CmdLine, []string{"/usr/bin/coredns"}) {
		bad(`ENTRYPOINT must be ["/usr/bin/coredns"] (exec form)`)
	}
	if cmd == nil || cmd.PrependShell || !slices.Equal(cmd.CmdLine, []string{"-conf", "/etc/infradns/Corefile"}) {
		bad(`CMD must be ["-conf", "/etc/infradns/Corefile"] (exec form)`)
	}
	return problems
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// makeBinaries asks the Makefile itself which binaries `make build` writes:
// every `-o bin/NAME` of `make -n build BIN=bin`.
func makeBinaries(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is needed to read the Makefile's build target: %v", err)
	}
	out, err := exec.Command("make", "-C", root, "--no-print-directory", "-n", "build", "BIN=bin").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	var bins []string
	for _, m := range regexp.MustCompile(`(?m)\s-o\s+bin/(\S+)`).FindAllStringSubmatch(string(out), -1) {
		bins = append(bins, m[1])
	}
	if !slices.Contains(bins, "coredns") {
		t.Fatalf("make -n build does not build bin/coredns? binaries %v from:\n%s", bins, out)
	}
	return bins
}

// goMinor is major.minor of go.mod's go line.
func goMinor(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(root + "/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go\s+(\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

func readDockerfile(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(root + "/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDockerfile(t *testing.T) {
	s := spec{binaries: makeBinaries(t), goVersion: goMinor(t)}
	t.Logf("make build makes %v; go.mod says go %s", s.binaries, s.goVersion)
	for _, p := range checkDockerfile(readDockerfile(t), s) {
		t.Error(p)
	}
}

func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(root + "/.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	for _, want := range []string{".git", "bin/"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not list %s", want)
		}
	}
	// go.mod, go.sum and the source must reach the build.
	for _, l := range lines {
		if l == "*" || l == "go.mod" || l == "go.sum" || l == "**/*.go" {
			t.Errorf(".dockerignore excludes %s, which the build stage needs", l)
		}
	}
}

// TestCheckDockerfileFails: each broken variant of the real Dockerfile (or of
// the Makefile's binary list) is reported, so the check above can fail.
func TestCheckDockerfileFails(t *testing.T) {
	good := string(readDockerfile(t))
	s := spec{binaries: makeBinaries(t), goVersion: goMinor(t)}
	if p := checkDockerfile([]byte(good), s); len(p) > 0 {
		t.Fatalf("the real Dockerfile fails already: %v", p)
	}
	tests := []struct {
		name     string
		old, new string // replaced once in the real Dockerfile
		binaries []string
		want     string
	}{
		{name: "a binary missing", old: " /src/bin/mdns-publisher /usr/bin/", new: " /usr/bin/",
			want: "binary mdns-publisher is built by make build but not copied"},
		{name: "a binary the Makefile does not make", old: " /usr/bin/\n", new: " /src/bin/extra /usr/bin/\n",
			want: "COPY --from=build extra: make build does not make it"},
		{name: "Makefile grew a binary", binaries: append(slices.Clone(s.binaries), "newtool"),
			want: "binary newtool is built by make build but not copied"},
		{name: "cgo", old: "RUN CGO_ENABLED=0 make build", new: "RUN make build", want: "without CGO_ENABLED=0"},
		{name: "root user", old: "USER 65532:65532", new: "USER root", want: `USER "root"`},
		{name: "uid 0", old: "USER 65532:65532", new: "USER 0:0", want: `USER "0:0"`},
		{name: "no haproxy", old: " haproxy iproute2", new: " iproute2", want: "does not apt-get install haproxy"},
		{name: "no file capability", old: "RUN setcap cap_net_bind_service=+ep /usr/bin/coredns\n", new: "", want: "does not setcap"},
		{name: "recommends", old: " --no-install-recommends", new: "", want: "without --no-install-recommends"},
		{name: "label missing", old: "org.opencontainers.image.vendor=", new: "org.example.vendor=",
			want: "no LABEL org.opencontainers.image.vendor"},
		{name: "wrong license", old: `licenses="Apache-2.0"`, new: `licenses="MIT"`, want: `"MIT", want "Apache-2.0"`},
		{name: "go version", old: "FROM golang:1.26-bookworm", new: "FROM golang:1.22-bookworm", want: "build stage FROM golang:1.22"},
		{name: "one stage", old: "FROM debian:bookworm-slim\n", new: "", want: "stage(s), want a build stage"},
		{name: "modules after source", old: "COPY go.mod go.sum ./\nRUN go mod download\nCOPY . .\n",
			new: "COPY . .\nRUN go mod download\n", want: "build stage does not COPY go.mod go.sum"},
		{name: "shell-form entrypoint", old: `ENTRYPOINT ["/usr/bin/coredns"]`, new: "ENTRYPOINT /usr/bin/coredns",
			want: "ENTRYPOINT must be"},
		{name: "syntax error", old: "FROM debian:bookworm-slim", new: "FROM debian:bookworm-slim AS", want: "instructions:"},
		{name: "lint warning", old: "FROM golang:1.26-bookworm AS build", new: "FROM golang:1.26-bookworm as build",
			want: "lint FromAsCasing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			df := good
			if tc.old != "" {
				if !strings.Contains(good, tc.old) {
					t.Fatalf("the Dockerfile no longer contains %q: update this case", tc.old)
				}
				df = strings.Replace(good, tc.old, tc.new, 1)
			}
			ts := s
			if tc.binaries != nil {
				ts.binaries = tc.binaries
			}
			problems := checkDockerfile([]byte(df), ts)
			t.Logf("reported:\n%s", strings.Join(problems, "\n"))
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("problems %q, want one containing %q", problems, tc.want)
			}
		})
	}
}
