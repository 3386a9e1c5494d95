package main

// The docs against the code: the README's list of subcommands against the
// dispatch table, the metrics ports the operator guide names against the
// rendered Corefiles and manifests, and the metric names the docs use
// against the prometheus definitions in the Go sources.

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const repoRoot = "../.."

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of md's section whose heading line is heading, up to
// the next heading of the same or a higher level ("" if there is none).
func section(md, heading string) string {
	level := strings.IndexFunc(heading, func(r rune) bool { return r != '#' })
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != heading {
			continue
		}
		var out []string
		for _, l := range lines[i+1:] {
			if n := strings.IndexFunc(l, func(r rune) bool { return r != '#' }); n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
				break
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	return ""
}

// readmeCommandsHeading is the README section that lists the subcommands,
// one bullet each: "- `NAME` ...".
const readmeCommandsHeading = "## The `infradns` command"

// TestREADMEListsSubcommands: the README lists every subcommand the binary
// dispatches (commands, main.go), and no other; so does the usage text.
func TestREADMEListsSubcommands(t *testing.T) {
	sec := section(readDoc(t, "README.md"), readmeCommandsHeading)
	if sec == "" {
		t.Fatalf("README.md: no section %q listing the subcommands", readmeCommandsHeading)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^[-*] `([a-z0-9-]+)`").FindAllStringSubmatch(sec, -1) {
		if listed[m[1]] {
			t.Errorf("README.md, section %q: `%s` is listed twice", readmeCommandsHeading, m[1])
		}
		listed[m[1]] = true
	}
	for _, name := range sortedCommands() {
		if !listed[name] {
			t.Errorf("README.md, section %q: subcommand %q (dispatched in cmd/infradns/main.go) is not listed: add a line \"- `%s` ...\"", readmeCommandsHeading, name, name)
		}
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + `\b`).MatchString(usage) {
			t.Errorf("cmd/infradns/main.go: the usage text has no entry for subcommand %q", name)
		}
	}
	for name := range listed {
		if _, ok := commands[name]; !ok {
			t.Errorf("README.md, section %q: lists `%s`, which cmd/infradns/main.go does not dispatch", readmeCommandsHeading, name)
		}
	}
}

func sortedCommands() []string {
	var out []string
	for name := range commands {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// The pods whose metrics ports the guide names.
const (
	podDNS       = "the DNS pod (CoreDNS)"
	podLBConfig  = "the lbconfig pod"
	podPublisher = "the mdns-publisher pod"
)

// renderedMetricsPorts renders a control-plane node from the example
// cluster file and reads each pod's metrics port from what kubelet runs:
// the prometheus directive of each Corefile, the publisher's flag.
func renderedMetricsPorts(t *testing.T) map[string]int {
	t.Helper()
	root := t.TempDir()
	args := []string{"render-node", "-f", example, "-role", "control-plane", "-node", "master-0", "-o", root}
	if err := run(context.Background(), args, &bytes.Buffer{}); err != nil {
		t.Fatalf("render-node: %v", err)
	}
	ports := map[string]int{}
	for pod, f := range map[string]struct{ path, re string }{
		podDNS:       {"etc/infradns/Corefile", `(?m)^\s*prometheus\s+\S*:(\d+)\s*$`},
		podLBConfig:  {"etc/infradns/lbconfig.Corefile", `(?m)^\s*prometheus\s+\S*:(\d+)\s*$`},
		podPublisher: {"etc/kubernetes/manifests/infradns-mdns-publisher.yaml", `--metrics-address=\S*:(\d+)`},
	} {
		b, err := os.ReadFile(filepath.Join(root, f.path))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(f.re).FindAllSubmatch(b, -1)
		if len(m) != 1 {
			t.Fatalf("rendered %s: %d matches of %s, want 1", f.path, len(m), f.re)
		}
		p, _ := strconv.Atoi(string(m[0][1]))
		ports[pod] = p
	}
	return ports
}

// metricsPortRE is a number that can only be a metrics port (9100-9199:
// the Prometheus exporters' range; haproxy's 9445 and 9454 are not in it).
var metricsPortRE = regexp.MustCompile(`\b91\d\d\b`)

// TestGuideMetricsPorts: every metrics port the operator guide names is the
// one render-node gives that pod, and the guide names each pod's. A port is
// attributed by the clause it is in (text between , ; | and sentence ends):
// "lbconfig" names the lbconfig pod, "publisher" the publisher's, "DNS" or
// "CoreDNS" (and no other) the DNS pod's. A table row that names metrics of
// one pod and a port must give that pod's port (lbconfig's metrics are not
// on the DNS pod's endpoint).
func TestGuideMetricsPorts(t *testing.T) {
	const guide = "docs/operator-guide.md"
	want := renderedMetricsPorts(t)
	named := map[string]bool{}
	for _, para := range paragraphs(readDoc(t, guide)) {
		i, line := para.line-1, para.text
		for _, clause := range regexp.MustCompile(`[,;|]|\. `).Split(line, -1) {
			for _, ps := range metricsPortRE.FindAllString(clause, -1) {
				port, _ := strconv.Atoi(ps)
				var pods []string
				if strings.Contains(clause, "lbconfig") {
					pods = append(pods, podLBConfig)
				}
				if strings.Contains(clause, "publisher") {
					pods = append(pods, podPublisher)
				}
				if len(pods) == 0 && (strings.Contains(clause, "DNS") || strings.Contains(clause, "infradns-dns")) {
					pods = append(pods, podDNS)
				}
				if len(pods) != 1 {
					t.Errorf("%s:%d: port %d in %q: say whose metrics port it is (lbconfig, publisher, or DNS/CoreDNS), once per clause", guide, i+1, port, strings.TrimSpace(clause))
					continue
				}
				named[pods[0]] = true
				if port != want[pods[0]] {
					t.Errorf("%s:%d: names %d as the metrics port of %s; render-node gives it %d (%q)", guide, i+1, port, pods[0], want[pods[0]], strings.TrimSpace(clause))
				}
			}
		}
	}
	// A table row that names metrics and a port: the port is that of the
	// pod that exports them.
	for _, para := range paragraphs(readDoc(t, guide)) {
		if !strings.HasPrefix(para.text, "|") {
			continue
		}
		owners := map[string]bool{}
		for _, m := range docMetricRE.FindAllString(para.text, -1) {
			switch {
			case strings.HasPrefix(m, "coredns_lbconfig_"):
				owners[podLBConfig] = true
			case strings.HasPrefix(m, "infradns_mdns_publisher_"):
				owners[podPublisher] = true
			default:
				owners[podDNS] = true
			}
		}
		if len(owners) != 1 {
			continue
		}
		for pod := range owners {
			for _, ps := range metricsPortRE.FindAllString(para.text, -1) {
				if port, _ := strconv.Atoi(ps); port != want[pod] {
					t.Errorf("%s:%d: a row of %s's metrics says port %d; render-node gives %s %d", guide, para.line, pod, port, pod, want[pod])
				}
			}
		}
	}
	for _, pod := range []string{podDNS, podLBConfig} {
		if !named[pod] {
			t.Errorf("%s does not name the metrics port of %s (%d)", guide, pod, want[pod])
		}
	}
}

type paragraph struct {
	line int // of its first line, from 1
	text string
}

// paragraphs joins the wrapped lines of md's paragraphs and list items into
// one line each; a table row, a heading or a fence line stays a line of its own.
func paragraphs(md string) []paragraph {
	var out []paragraph
	cur := -1
	for i, l := range strings.Split(md, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || strings.HasPrefix(t, "|") || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			out = append(out, paragraph{i + 1, t})
			cur = -1
		case cur >= 0 && !strings.HasPrefix(t, "- ") && !strings.HasPrefix(t, "* ") && !regexp.MustCompile(`^\d+\. `).MatchString(t):
			out[cur].text += " " + t
		default:
			out = append(out, paragraph{i + 1, t})
			cur = len(out) - 1
		}
	}
	return out
}

// definedMetric is a metric the Go sources define, and where.
type definedMetric struct {
	name string
	file string // relative to the repository
}

// definedMetrics reads the prometheus *Opts literals of the non-test Go
// files under dirs (relative to the repository) and returns their full
// names by directory. Namespace, Subsystem and Name may be string literals,
// package constants with a literal value, or CoreDNS's plugin.Namespace.
func definedMetrics(t *testing.T, dirs ...string) map[string][]definedMetric {
	t.Helper()
	out := map[string][]definedMetric{}
	for _, dir := range dirs {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		consts := map[string]string{}
		var parsed []*ast.File
		var names []string
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, f)
			names = append(names, filepath.ToSlash(filepath.Join(dir, filepath.Base(path))))
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[n.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
		value := func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.BasicLit:
				s, err := strconv.Unquote(e.Value)
				return s, err == nil
			case *ast.Ident:
				s, ok := consts[e.Name]
				return s, ok
			case *ast.SelectorExpr:
				if x, ok := e.X.(*ast.Ident); ok && x.Name == "plugin" && e.Sel.Name == "Namespace" {
					return "coredns", true // github.com/coredns/coredns/plugin.Namespace
				}
			}
			return "", false
		}
		for i, f := range parsed {
			ast.Inspect(f, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok {
					return true
				}
				sel, ok := cl.Type.(*ast.SelectorExpr)
				if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
					return true
				}
				parts := map[string]string{}
				for _, el := range cl.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key := kv.Key.(*ast.Ident).Name
					if key != "Namespace" && key != "Subsystem" && key != "Name" {
						continue
					}
					v, ok := value(kv.Value)
					if !ok {
						t.Fatalf("%s: %s of a prometheus.%s is not a literal or a constant this test can read", fset.Position(kv.Pos()), key, sel.Sel.Name)
					}
					parts[key] = v
				}
				var full []string
				for _, k := range []string{"Namespace", "Subsystem", "Name"} {
					if parts[k] != "" {
						full = append(full, parts[k])
					}
				}
				out[dir] = append(out[dir], definedMetric{strings.Join(full, "_"), names[i]})
				return true
			})
		}
	}
	return out
}

// pluginDirs are the plugins with a README, each the owner of the metrics
// its Go sources define.
func pluginDirs(t *testing.T) []string {
	t.Helper()
	readmes, err := filepath.Glob(filepath.Join(repoRoot, "plugin", "*", "README.md"))
	if err != nil || len(readmes) == 0 {
		t.Fatalf("no plugin READMEs: %v", err)
	}
	var out []string
	for _, r := range readmes {
		out = append(out, filepath.ToSlash(filepath.Join("plugin", filepath.Base(filepath.Dir(r)))))
	}
	return out
}

// stockCoreDNS are the prefixes of the metrics of stock CoreDNS plugins and
// its server, which the docs may name: they are defined in CoreDNS, not here.
var stockCoreDNS = []string{
	"coredns_dns_", "coredns_cache_", "coredns_forward_", "coredns_proxy_", "coredns_hosts_",
	"coredns_template_", "coredns_reload_", "coredns_health_", "coredns_build_info",
	"coredns_panics_total", "coredns_plugin_enabled",
}

// docMetricRE is a metric name of ours or of CoreDNS in a doc.
var docMetricRE = regexp.MustCompile(`\b(?:coredns|infradns_mdns_publisher)_[a-z0-9_]*[a-z0-9]`)

// TestDocsMetricsDefined: every coredns_... (and infradns_mdns_publisher_...)
// metric the docs name is defined in the Go sources (or is a stock
// CoreDNS one), and every metric a plugin defines is listed in the Metrics
// section of its README (the publisher's in its own README).
func TestDocsMetricsDefined(t *testing.T) {
	plugins := pluginDirs(t)
	defs := definedMetrics(t, append(slices.Clone(plugins), "cmd/mdns-publisher")...)
	defined := map[string]string{}
	for _, ms := range defs {
		for _, m := range ms {
			defined[m.name] = m.file
		}
	}
	for _, p := range plugins {
		if len(defs[p]) == 0 {
			continue
		}
		if !slices.ContainsFunc(defs[p], func(m definedMetric) bool { return strings.HasPrefix(m.name, "coredns_"+filepath.Base(p)+"_") }) {
			t.Errorf("%s: found no coredns_%s_... metric: does this test still read its definitions?", p, filepath.Base(p))
		}
	}
	if len(defs["cmd/mdns-publisher"]) == 0 {
		t.Error("cmd/mdns-publisher: no metric definitions found")
	}

	// Every doc that may name a metric.
	docs := []string{"README.md", "cmd/mdns-publisher/README.md"}
	for _, glob := range []string{"docs/*.md", "plugin/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(repoRoot, f)
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	for _, doc := range docs {
		for i, line := range strings.Split(readDoc(t, doc), "\n") {
			for _, loc := range docMetricRE.FindAllStringIndex(line, -1) {
				name := line[loc[0]:loc[1]]
				if rest := line[loc[1]:]; strings.HasPrefix(rest, "_...") || strings.HasPrefix(rest, "...") {
					continue // a prefix: "coredns_lbconfig_..."
				}
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if d := strings.TrimSuffix(name, suffix); d != name && defined[d] != "" {
						name = d
					}
				}
				if defined[name] != "" || slices.ContainsFunc(stockCoreDNS, func(p string) bool { return strings.HasPrefix(name, p) }) {
					continue
				}
				t.Errorf("%s:%d: names metric %s, which no Go source defines (plugin/*, cmd/mdns-publisher)", doc, i+1, name)
			}
		}
	}

	// Each plugin's README lists every metric the plugin defines.
	owners := map[string]string{"cmd/mdns-publisher": "cmd/mdns-publisher/README.md"}
	for _, p := range plugins {
		owners[p] = p + "/README.md"
	}
	for dir, readme := range owners {
		sec := section(readDoc(t, readme), "## Metrics")
		if sec == "" && len(defs[dir]) > 0 {
			t.Errorf("%s: no \"## Metrics\" section, but %s defines %d metrics", readme, dir, len(defs[dir]))
			continue
		}
		listed := map[string]bool{}
		for _, name := range docMetricRE.FindAllString(sec, -1) {
			listed[name] = true
		}
		for _, m := range defs[dir] {
			if !listed[m.name] {
				t.Errorf("%s: the Metrics section does not list %s (defined in %s)", readme, m.name, m.file)
			}
		}
	}
}
