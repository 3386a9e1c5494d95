//go:build e2e || scale

package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NetNS is a network namespace of the test's own with only loopback up. A
// node's lbconfig in vip-mode bgp holds its VIPs and the Services'
// addresses as local routes and writes its announcements into a kernel
// table: in a namespace of its own they touch neither the host nor the
// other tests that share it. Nothing is named under /run/netns: the
// namespace lives while f (and the processes in it) hold it.
type NetNS struct {
	f *os.File
}

// NewNetNS makes the namespace; t.Cleanup lets it go.
func NewNetNS(t testing.TB) *NetNS {
	t.Helper()
	var ns *NetNS
	err := onThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare: %w", err)
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			return err
		}
		ns = &NetNS{f: f}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		return err
	})
	if err != nil {
		t.Fatalf("network namespace: %v", err)
	}
	t.Cleanup(func() { ns.f.Close() })
	return ns
}

// Do runs f on a thread inside the namespace. A socket keeps the
// namespace it was made in, so listeners and connections made in f are
// used from anywhere afterwards.
func (n *NetNS) Do(f func() error) error {
	return onThread(func() error {
		if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("setns: %w", err)
		}
		return f()
	})
}

// Dial connects from inside the namespace: to a process's metrics there.
func (n *NetNS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Forward listens on loopback inside the namespace and relays each
// connection to target outside it (the apiserver, which listens on the
// host's loopback); it returns the address to use inside.
func (n *NetNS) Forward(t testing.TB, target string) string {
	t.Helper()
	var l net.Listener
	if err := n.Do(func() error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatalf("forward to %s: %v", target, err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	// Watches never end on their own: the test's end closes them.
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { relay(in, out) })
		}
	})
	return l.Addr().String()
}

func relay(in, out net.Conn) {
	defer in.Close()
	defer out.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		_ = out.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(in, out)
	_ = in.(*net.TCPConn).CloseWrite()
	<-done
}

// onThread runs f on a locked OS thread and moves the thread back to the
// test's namespace after. The thread must survive: a process started
// with Pdeathsig (CoreDNS's here, kubetest's apiserver) is killed when the
// thread that forked it exits, and Go ends a thread whose goroutine ends
// locked, which may be that very thread. Only when the way back fails is
// the thread left locked, and so ended, rather than handed to other
// goroutines in the wrong namespace.
func onThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer home.Close()
		ferr := f()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("back to the test's namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}
