package mdnsnodes

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// clogHandler sends the mDNS engine's slog records to CoreDNS's plugin
// logger, so they carry the plugin/mdnsnodes prefix and honour the debug plugin.
type clogHandler struct{ attrs []slog.Attr }

func (clogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h clogHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	switch {
	case r.Level >= slog.LevelError:
		log.Error(b.String())
	case r.Level >= slog.LevelWarn:
		log.Warning(b.String())
	case r.Level >= slog.LevelInfo:
		log.Info(b.String())
	default:
		log.Debug(b.String())
	}
	return nil
}

func (h clogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return clogHandler{attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h clogHandler) WithGroup(string) slog.Handler { return h }
