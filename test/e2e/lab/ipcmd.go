package lab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ipCmd runs `ip ARGS…`.
func ipCmd(args ...string) error { return runIP("", args...) }

// ipBatch runs several ip commands in namespace ns with one process.
func ipBatch(ns string, cmds ...string) error {
	return runIP(strings.Join(cmds, "\n")+"\n", "-n", ns, "-batch", "-")
}

func runIP(stdin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// nsSysctl sets sysctls inside namespace ns. With optional, keys the kernel
// does not have are ignored.
func nsSysctl(ns string, optional bool, kvs ...string) error {
	args := []string{"netns", "exec", ns, "sysctl", "-q", "-w"}
	if optional {
		args = append(args, "-e")
	}
	return ipCmd(append(args, kvs...)...)
}

// nsStdin runs argv inside namespace ns with stdin.
func nsStdin(ns, stdin string, argv ...string) error {
	return runIP(stdin, append([]string{"netns", "exec", ns}, argv...)...)
}
