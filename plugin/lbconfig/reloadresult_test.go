package lbconfig

import (
	"errors"
	"fmt"
	"testing"

	"github.com/infradns/infradns/internal/lb"
)

func TestReloadResult(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, reloadSuccess},
		{fmt.Errorf("reload: haproxy master socket: %w", fmt.Errorf("%w: dial", lb.ErrNotRunning)), reloadNotRunning},
		{errors.New("reload: haproxy master: Success=0"), reloadFailure},
	} {
		if got := reloadResult(tc.err); got != tc.want {
			t.Errorf("reloadResult(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
