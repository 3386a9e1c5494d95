//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeNameAfterNXDOMAIN: with the production Corefile's `cache 30`, a
// node name asked before the node exists (NXDOMAIN) is answered as soon as
// the node appears, not 30 s later: the infradns plugins answer ahead of
// cache, so cache never holds their negative answers. A forwarded name is
// still cached (the upstream is asked once).
func TestNodeNameAfterNXDOMAIN(t *testing.T) {
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	upstream := startCountingUpstream(t)
	dnsPort := freeUDPPort(t)
	core := startHostCoreDNS(t, t.TempDir(), fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    cache 30
    apiint 192.0.2.5 {
        zone %s
    }
    mdnsnodes {
        zone %s
        kubeconfig %s
    }
    forward . %s
}
`, dnsPort, mnkZone, mnkZone, c.Kubeconfig, upstream.addr))
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	lab.Eventually(t, 20*time.Second, 20*time.Millisecond, "api answered", func() error {
		if gone, err := core.Exited(); gone {
			t.Fatalf("coredns exited: %v", err)
		}
		if a := mnkQuery(server, "api."+mnkZone, dns.TypeA); a != "NOERROR 192.0.2.5" {
			return fmt.Errorf("%q", a)
		}
		return nil
	})
	// mdnsnodes says SERVFAIL until its first Node list, then NXDOMAIN.
	lab.Eventually(t, 20*time.Second, 20*time.Millisecond, "mdnsnodes ready", func() error {
		if a := mnkQuery(server, "late-0."+mnkZone, dns.TypeA); a != "NXDOMAIN" {
			return fmt.Errorf("%q", a)
		}
		return nil
	})
	// Asked again before it exists (the second would come from cache).
	for range 2 {
		if a := mnkQuery(server, "late-0."+mnkZone, dns.TypeA); a != "NXDOMAIN" {
			t.Fatalf("late-0 before its Node: %q, want NXDOMAIN", a)
		}
	}
	began := time.Now()
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, mnkNode("late-0", "198.51.100.90"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 5*time.Second, 5*time.Millisecond, "late-0 answered", func() error {
		if a := mnkQuery(server, "late-0."+mnkZone, dns.TypeA); a != "NOERROR 198.51.100.90" {
			return fmt.Errorf("%q", a)
		}
		return nil
	})
	d := time.Since(began)
	t.Logf("measure: Node created after an NXDOMAIN for its name → answered %v later (cache 30 in the block)", d.Round(time.Millisecond))
	if d > time.Second {
		t.Errorf("answered %v after the Node appeared, want < 1 s", d)
	}
	// Forwarded names are cached: three questions, one upstream query.
	for range 3 {
		if a := mnkQuery(server, "www.example.net.", dns.TypeA); a != "NOERROR 203.0.113.80" {
			t.Fatalf("www.example.net: %q", a)
		}
	}
	if n := upstream.count("www.example.net."); n != 1 {
		t.Errorf("upstream asked %d times for a cached name, want 1", n)
	}
}

// countingUpstream is a DNS server on loopback that answers every A
// question with 203.0.113.80 and counts the questions per name.
type countingUpstream struct {
	addr string
	mu   sync.Mutex
	seen map[string]int
}

func startCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &countingUpstream{addr: pc.LocalAddr().String(), seen: map[string]int{}}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if len(r.Question) == 1 {
			q := r.Question[0]
			u.mu.Lock()
			u.seen[q.Name]++
			u.mu.Unlock()
			if q.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP("203.0.113.80")})
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return u
}

func (u *countingUpstream) count(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[name]
}
