package directive

import "github.com/coredns/caddy"

// Once records where each option of one directive block was given, so that an
// option given twice is refused with both positions instead of the last one
// silently winning. Use one Once per block (per pass of c.Next()); the zero
// value is ready.
type Once struct {
	first map[string]position
}

type position struct {
	file string
	line int
}

// Use records the option under the cursor, c.Val(), at its line. If the block
// already had it, Use returns an error at the current line that names the
// option and the line of its first use:
//
//	Corefile:7 - Error during parsing: zone: used more than once (first on line 5)
//
// When the first use came from another file (an import), that file is named too.
func (o *Once) Use(c *caddy.Controller) error { return o.UseAs(c, c.Val()) }

// UseAs is Use for an option that may be given once per kind, recorded as
// name ("reload keepalived" and "reload haproxy" are two options).
func (o *Once) UseAs(c *caddy.Controller, name string) error {
	here := position{file: c.File(), line: c.Line()}
	if p, ok := o.first[name]; ok {
		if p.file != here.file {
			return c.Errf("%s: used more than once (first on %s:%d)", name, p.file, p.line)
		}
		return c.Errf("%s: used more than once (first on line %d)", name, p.line)
	}
	if o.first == nil {
		o.first = map[string]position{}
	}
	o.first[name] = here
	return nil
}

// Line is the line an option was first given on, 0 if it was not: for an
// error found after the block, at the option that caused it.
func (o *Once) Line(name string) int { return o.first[name].line }
