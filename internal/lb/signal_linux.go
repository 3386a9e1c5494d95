package lb

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// signalChecked signals pid if check, run after pid was pinned, accepts
// it. The pidfd pins the process: if it ends and its pid is reused between
// the check and the signal, the signal fails (ESRCH) instead of reaching
// the newcomer. Kernels before 5.3 have no pidfd, and a seccomp profile
// may refuse it (EPERM, which pidfd_open never returns otherwise): check,
// then kill.
func signalChecked(pid int, sig syscall.Signal, check func() error) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EPERM) {
		if err := check(); err != nil {
			return err
		}
		return syscall.Kill(pid, sig)
	}
	if err != nil {
		return err // ESRCH: gone
	}
	defer unix.Close(fd)
	if err := check(); err != nil {
		return err
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// bootTime is the wall-clock time of boot: now less CLOCK_BOOTTIME, the
// clock /proc's start times count (it includes suspend, and NTP slews it
// as it slews the wall clock, so only a step of the wall clock moves this).
func bootTime() time.Time {
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}
	}
	return now.Add(-time.Duration(ts.Nano()))
}
