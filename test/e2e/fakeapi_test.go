//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"time"
)

// fakeapiResult is one request of test/e2e/internal/fakeapi's probe or hold
// mode.
type fakeapiResult struct {
	start, end time.Time
	ok         bool
	detail     string // the body, or the error
	local      string // hold only: the connection's local address
}

// parseFakeAPI reads fakeapi's lines: "START_UNIX_NANO END_UNIX_NANO
// ok|fail DETAIL [LOCAL]". A line cut short by a kill is skipped.
func parseFakeAPI(log string) []fakeapiResult {
	var out []fakeapiResult
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		s, err1 := strconv.ParseInt(f[0], 10, 64)
		e, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		r := fakeapiResult{start: time.Unix(0, s), end: time.Unix(0, e), ok: f[2] == "ok"}
		if len(f) > 3 {
			r.detail = f[3]
		}
		if len(f) > 4 {
			r.local = f[4]
		}
		out = append(out, r)
	}
	return out
}
