// Package plugintest holds what the plugins' tests and benchmarks share: the
// trivial one-map-lookup handler they are compared with, a writer that packs
// every reply as the server would, and free ports for servers under test.
// Test support only; no product code imports it.
package plugintest

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// Serve benchmarks h answering one question, after checking it answers with
// rcode.
func Serve(b *testing.B, h plugin.Handler, qname string, qtype uint16, rcode int) {
	req := new(dns.Msg)
	req.SetQuestion(qname, qtype)
	w := &packWriter{}
	ctx := context.Background()
	if _, err := h.ServeDNS(ctx, w, req); err != nil || w.rcode != rcode {
		b.Fatalf("%s %s: rcode %d, error %v; want rcode %d", h.Name(), qname, w.rcode, err, rcode)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.ServeDNS(ctx, w, req); err != nil {
			b.Fatal(err)
		}
	}
}

// packWriter packs every reply into a reused buffer, as the server's UDP
// writer does (minus the syscall).
type packWriter struct {
	test.ResponseWriter
	buf   []byte
	rcode int
}

func (w *packWriter) WriteMsg(m *dns.Msg) error {
	if w.buf == nil {
		w.buf = make([]byte, dns.MinMsgSize)
	}
	buf, err := m.PackBuffer(w.buf)
	w.buf, w.rcode = buf, m.Rcode
	return err
}

// mapHandler is the trivial handler: one map lookup of pre-built records.
type mapHandler struct {
	zone  string
	names map[string][2][]dns.RR // name → A, AAAA
}

// NewMapHandler returns the trivial handler for addrs: name → {IPv4, IPv6}.
func NewMapHandler(zone string, addrs map[string][2]string) plugin.Handler {
	h := &mapHandler{zone: zone, names: map[string][2][]dns.RR{}}
	for name, a := range addrs {
		hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: 30}
		h4, h6 := hdr, hdr
		h4.Rrtype, h6.Rrtype = dns.TypeA, dns.TypeAAAA
		h.names[name] = [2][]dns.RR{{&dns.A{Hdr: h4, A: net.ParseIP(a[0]).To4()}}, {&dns.AAAA{Hdr: h6, AAAA: net.ParseIP(a[1])}}}
	}
	return h
}

func (h *mapHandler) ServeDNS(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	rrs, ok := h.names[strings.ToLower(q.Name)]
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	switch {
	case !ok:
		m.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		m.Answer = rrs[0]
	case q.Qtype == dns.TypeAAAA:
		m.Answer = rrs[1]
	}
	return m.Rcode, w.WriteMsg(m)
}

func (h *mapHandler) Name() string { return "map" }
