package lb

import (
	"bytes"
	"embed"
	"fmt"
	"text/template"
)

//go:embed templates/*.tmpl
var builtin embed.FS

// Templates are the two parsed templates a Plan is rendered with.
type Templates struct {
	keepalived *template.Template
	haproxy    *template.Template
}

// Default holds the built-in templates, parsed once.
var Default = mustBuiltin()

func mustBuiltin() *Templates {
	k, err := builtin.ReadFile("templates/keepalived.conf.tmpl")
	if err != nil {
		panic(err)
	}
	h, err := builtin.ReadFile("templates/haproxy.cfg.tmpl")
	if err != nil {
		panic(err)
	}
	t, err := parseTemplates(&Templates{}, string(k), string(h))
	if err != nil {
		panic(err) // a broken built-in template is a build defect
	}
	return t
}

// ParseTemplates parses user templates (the keepalived/haproxy TEMPLATE
// options); an empty text keeps the built-in one. A field the Plan does not
// have is an error when rendering, never an empty string in the output.
func ParseTemplates(keepalived, haproxy string) (*Templates, error) {
	t := *Default
	return parseTemplates(&t, keepalived, haproxy)
}

func parseTemplates(t *Templates, keepalived, haproxy string) (*Templates, error) {
	var err error
	if keepalived != "" {
		if t.keepalived, err = template.New("keepalived").Option("missingkey=error").Parse(keepalived); err != nil {
			return nil, fmt.Errorf("keepalived template: %w", err)
		}
	}
	if haproxy != "" {
		if t.haproxy, err = template.New("haproxy").Option("missingkey=error").Parse(haproxy); err != nil {
			return nil, fmt.Errorf("haproxy template: %w", err)
		}
	}
	if t.keepalived == nil || t.haproxy == nil {
		return nil, fmt.Errorf("both templates are needed")
	}
	return t, nil
}

// RenderKeepalived renders keepalived.conf with the built-in template.
func RenderKeepalived(p Plan) ([]byte, error) { return Default.Keepalived(p) }

// RenderHAProxy renders haproxy.cfg with the built-in template.
func RenderHAProxy(p Plan) ([]byte, error) { return Default.HAProxy(p) }

// Keepalived renders keepalived.conf.
func (t *Templates) Keepalived(p Plan) ([]byte, error) {
	return execute(t.keepalived, p)
}

// HAProxy renders haproxy.cfg.
func (t *Templates) HAProxy(p Plan) ([]byte, error) {
	return execute(t.haproxy, p)
}

func execute(t *template.Template, p Plan) ([]byte, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("render %s: %w", t.Name(), err)
	}
	return b.Bytes(), nil
}
