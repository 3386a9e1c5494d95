// Package image reads the repository's Dockerfile and builds the same image
// without a container engine or a registry: Debian's packages from the
// archive (mmdebstrap), our static binaries, the file capabilities, user,
// labels and entrypoint, written as an OCI image layout that containerd
// imports (make image-oci). The Dockerfile stays the one description: the
// builder reads its final stage, so the two cannot drift apart.
package image

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// Final is what the Dockerfile's last stage puts in the image.
type Final struct {
	Base       string            // FROM, e.g. debian:bookworm-slim
	Packages   []string          // apt-get install arguments that are not options
	Binaries   []string          // base names copied --from=build
	BinDir     string            // where they are copied to
	FileCaps   map[string]string // path → setcap text, e.g. cap_net_bind_service=+ep
	Labels     map[string]string // ARGs expanded
	User       string
	Entrypoint []string // exec form only
	Cmd        []string
	Env        []string // ENV, KEY=VALUE
}

// ReadFinal parses Dockerfile text df and returns its last stage, with the
// build arguments in args substituted (an ARG's default where args lacks it).
func ReadFinal(df []byte, args map[string]string) (Final, error) {
	res, err := parser.Parse(bytes.NewReader(df))
	if err != nil {
		return Final{}, fmt.Errorf("parse Dockerfile: %w", err)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return Final{}, fmt.Errorf("Dockerfile: %w", err)
	}
	if len(stages) == 0 {
		return Final{}, fmt.Errorf("Dockerfile has no stage")
	}
	// Global ARG defaults, overridden by args; a stage sees a global ARG only
	// when it declares it again, as in a real build.
	global := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value != nil {
				global[kv.Key] = *kv.Value
			}
			if v, ok := args[kv.Key]; ok {
				global[kv.Key] = v
			}
		}
	}
	st := stages[len(stages)-1]
	f := Final{Base: st.BaseName, FileCaps: map[string]string{}, Labels: map[string]string{}}
	env := map[string]string{}
	lex := shell.NewLex('\\')
	expand := func(s string) (string, error) {
		r, err := lex.ProcessWordWithMatches(s, shell.EnvsFromSlice(envList(env)))
		return r.Result, err
	}
	for _, c := range st.Commands {
		switch c := c.(type) {
		case *instructions.ArgCommand:
			for _, kv := range c.Args {
				v, ok := args[kv.Key]
				if !ok {
					v, ok = global[kv.Key]
				}
				if !ok && kv.Value != nil {
					v, ok = *kv.Value, true
				}
				if ok {
					env[kv.Key] = v
				}
			}
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				v, err := expand(kv.Value)
				if err != nil {
					return f, fmt.Errorf("ENV %s: %w", kv.Key, err)
				}
				env[kv.Key] = v
				f.Env = append(f.Env, kv.Key+"="+v)
			}
		case *instructions.LabelCommand:
			for _, kv := range c.Labels {
				v, err := expand(kv.Value)
				if err != nil {
					return f, fmt.Errorf("LABEL %s: %w", kv.Key, err)
				}
				f.Labels[kv.Key] = v
			}
		case *instructions.CopyCommand:
			if c.From != "build" {
				return f, fmt.Errorf("line %d: COPY in the final stage not --from=build: the OCI build only copies make build's binaries", c.Location()[0].Start.Line)
			}
			f.BinDir = path.Clean(c.DestPath)
			for _, p := range c.SourcePaths {
				f.Binaries = append(f.Binaries, path.Base(p))
			}
		case *instructions.RunCommand:
			if err := f.readRun(strings.Join(c.CmdLine, " ")); err != nil {
				return f, fmt.Errorf("line %d: %w", c.Location()[0].Start.Line, err)
			}
		case *instructions.UserCommand:
			f.User = c.User
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				return f, fmt.Errorf("ENTRYPOINT in shell form: only the exec form is built")
			}
			f.Entrypoint = c.CmdLine
		case *instructions.CmdCommand:
			if c.PrependShell {
				return f, fmt.Errorf("CMD in shell form: only the exec form is built")
			}
			f.Cmd = c.CmdLine
		default:
			return f, fmt.Errorf("%s in the final stage: the OCI build does not know it", c.Name())
		}
	}
	return f, nil
}

// readRun takes the parts of a RUN line the OCI build reproduces: packages
// installed with apt-get and file capabilities set with setcap. Anything
// else a RUN does is refused, so a new step cannot be silently left out.
func (f *Final) readRun(line string) error {
	for _, part := range strings.Split(line, "&&") {
		w := strings.Fields(part)
		switch {
		case len(w) == 0:
		case w[0] == "apt-get" && slices.Contains(w, "install"):
			for _, p := range w[slices.Index(w, "install")+1:] {
				if !strings.HasPrefix(p, "-") {
					f.Packages = append(f.Packages, p)
				}
			}
		case w[0] == "apt-get" && len(w) == 2 && w[1] == "update":
		case w[0] == "rm" && slices.Equal(w, []string{"rm", "-rf", "/var/lib/apt/lists/*"}):
		case w[0] == "setcap" && len(w) == 3:
			f.FileCaps[w[2]] = w[1]
		default:
			return fmt.Errorf("RUN step %q: the OCI build knows apt-get update/install, rm -rf /var/lib/apt/lists/* and setcap CAPS FILE only", strings.TrimSpace(part))
		}
	}
	return nil
}

func envList(m map[string]string) []string {
	var l []string
	for k, v := range m {
		l = append(l, k+"="+v)
	}
	slices.Sort(l)
	return l
}
