package lb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/cluster"
)

// Logger is what the controller logs through (CoreDNS's clog.P fits).
type Logger interface {
	Infof(format string, v ...any)
	Warningf(format string, v ...any)
	Errorf(format string, v ...any)
}

// Output is one managed file.
type Output struct {
	Kind     Kind
	Path     string
	Reloader Reloader // nil: write only
}

// Hooks report what the controller did, for metrics. Any may be nil.
type Hooks struct {
	Refused   func(error)       // Desired refused the snapshot; last good kept
	Planned   func(Plan)        // Desired accepted it: the plan about to be rendered
	Rendered  func()            // a plan was rendered
	Invalid   func(Kind, error) // the tool rejected a render; old file kept
	Written   func(Kind)
	Reloaded  func(Kind, error)
	Succeeded func(time.Time) // everything applied and reloaded
}

// Controller is the pipeline snapshot → Desired → Render → Validate →
// write if changed → reload. Apply is a kube.Handler.
type Controller struct {
	Model     *cluster.Model
	Templates *Templates
	Validator Validator
	Outputs   []Output
	Log       Logger
	Hooks     Hooks
	// Gate, when set, may hold an output back (keepalived until the VRRP
	// guard has listened long enough and seen no clash). A held output is
	// retried: Apply returns an error so the caller backs off and calls again.
	Gate func(Kind, Plan) error
	// Loaded is what each daemon is known to run (see Loaded): a file is
	// reloaded when it changed or its daemon is not known to run it, so a
	// failed reload is retried though the file on disk is already current,
	// and the first apply reloads even an unchanged file. nil: the
	// controller's own, empty at its first Apply.
	Loaded *Loaded

	mu sync.Mutex
}

// Apply renders the snapshot into the outputs. It returns an error only for
// what a retry can fix (a write or a reload); a snapshot Desired refuses or a
// render the tool rejects keeps the old files and returns nil, because the
// next change in the cluster is what can fix it.
func (c *Controller) Apply(ctx context.Context, s cluster.Snapshot) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Loaded == nil {
		c.Loaded = &Loaded{}
	}
	plan, err := Desired(s, c.Model)
	if err != nil {
		c.Log.Warningf("keeping the current files: %v", err)
		call1(c.Hooks.Refused, err)
		return nil
	}
	call1(c.Hooks.Planned, plan)
	tpl := c.Templates
	if tpl == nil {
		tpl = Default
	}
	rendered := map[Kind][]byte{}
	for _, o := range c.Outputs {
		var b []byte
		switch o.Kind {
		case Keepalived:
			b, err = tpl.Keepalived(plan)
		case HAProxyCfg:
			b, err = tpl.HAProxy(plan)
		default:
			err = fmt.Errorf("unknown output kind %q", o.Kind)
		}
		if err != nil {
			// A user template that needs what the plan lacks: not retryable.
			c.Log.Errorf("keeping %s: %v", o.Path, err)
			call2(c.Hooks.Invalid, o.Kind, err)
			return nil
		}
		rendered[o.Kind] = b
	}
	call0(c.Hooks.Rendered)

	var errs []error
	invalid := false
	for _, o := range c.Outputs {
		if c.Gate != nil {
			if err := c.Gate(o.Kind, plan); err != nil {
				errs = append(errs, fmt.Errorf("%s held back: %w", o.Kind, err))
				continue
			}
		}
		changed, err := Install(ctx, c.Validator, o.Kind, o.Path, rendered[o.Kind])
		if ctx.Err() != nil {
			return nil // shutting down: a killed validator is no verdict
		}
		if changed {
			// Even with an error: the file was replaced (only syncing its
			// directory failed), so the daemon must be reloaded.
			c.Log.Infof("wrote %s", o.Path)
			call1(c.Hooks.Written, o.Kind)
		}
		var ve *ValidationError
		switch {
		case errors.As(err, &ve):
			invalid = true
			c.Log.Errorf("keeping %s: %v", o.Path, err)
			call2(c.Hooks.Invalid, o.Kind, err)
			continue
		case err != nil && !changed:
			errs = append(errs, err)
			continue
		case err != nil:
			errs = append(errs, err) // retried; the reload below still runs
		}
		if o.Reloader != nil && c.Loaded.needs(o, rendered[o.Kind], changed) {
			err := o.Reloader.Reload(ctx)
			call2(c.Hooks.Reloaded, o.Kind, err)
			if !c.Loaded.reloaded(o, rendered[o.Kind], changed, err) {
				errs = append(errs, fmt.Errorf("%s: %w", o.Kind, err))
				continue
			}
			switch {
			case err != nil:
				c.Log.Infof("%s not running: it reads %s when it starts", o.Kind, o.Path)
			case changed:
				c.Log.Infof("reloaded %s", o.Kind)
			default:
				c.Log.Infof("reloaded %s: %s was not changed, but %s may not run it (a write before this start may not have been followed by a reload)", o.Kind, o.Path, o.Kind)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if !invalid {
		call1(c.Hooks.Succeeded, time.Now())
	}
	return nil
}

func call0(f func()) {
	if f != nil {
		f()
	}
}

func call1[T any](f func(T), v T) {
	if f != nil {
		f(v)
	}
}

func call2[A, B any](f func(A, B), a A, b B) {
	if f != nil {
		f(a, b)
	}
}
