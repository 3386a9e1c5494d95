//go:build !linux

package lb

import (
	"errors"
	"syscall"
	"time"
)

// signalChecked needs Linux's /proc to check what a pid is: elsewhere it
// never signals.
func signalChecked(int, syscall.Signal, func() error) error {
	return errors.New("checking a pid file's process needs Linux's /proc")
}

func bootTime() time.Time { return time.Time{} }
