package authority

import (
	"context"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNewQuery(t *testing.T) {
	tests := []struct {
		qname, want string
	}{
		{"api.ocp4.example.com.", "api.ocp4.example.com."},
		{"API-Int.OCP4.Example.COM.", "api-int.ocp4.example.com."},
		{"a\\.b.ZZ.", "a\\.b.zz."},
		{"\\200X.", "\\200x."},
	}
	for _, tc := range tests {
		r := new(dns.Msg).SetQuestion(tc.qname, dns.TypeAAAA)
		q, ok := NewQuery(r)
		if !ok {
			t.Fatalf("NewQuery(%q) reported no question", tc.qname)
		}
		if q.Name != tc.want || q.QName != tc.qname || q.Type != dns.TypeAAAA {
			t.Errorf("NewQuery(%q) = %+v, want Name %q, QName %q, Type AAAA", tc.qname, q, tc.want, tc.qname)
		}
	}
	if _, ok := NewQuery(new(dns.Msg)); ok {
		t.Error("NewQuery of a message without a question reported one")
	}
}

func TestLowerASCIIKeepsLowerCaseString(t *testing.T) {
	s := "already.lower.example."
	if n := testing.AllocsPerRun(100, func() { _ = lowerASCII(s) }); n != 0 {
		t.Errorf("lowerASCII of a lower-case name allocated %v times, want 0", n)
	}
}

func TestMatch(t *testing.T) {
	a := New([]string{"example.com.", "ocp4.example.com.", "apps.other.org."}, 30, fall.Zero)
	tests := []struct{ name, want string }{
		{"example.com.", "example.com."},
		{"x.example.com.", "example.com."},
		{"ocp4.example.com.", "ocp4.example.com."},
		{"api.ocp4.example.com.", "ocp4.example.com."},
		{"xocp4.example.com.", "example.com."},
		{"other.org.", ""},
		{"a.apps.other.org.", "apps.other.org."},
		{"com.", ""},
	}
	for _, tc := range tests {
		if got := a.Match(tc.name); got != tc.want {
			t.Errorf("Match(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = a.Match("api.ocp4.example.com.") }); n != 0 {
		t.Errorf("Match allocated %v times per call, want 0", n)
	}
}

func TestCounter(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_requests_total"}, []string{"server", "result"})
	c := NewCounter(vec)
	one := context.WithValue(context.Background(), dnsserver.Key{}, &dnsserver.Server{Addr: "dns://:53"})
	two := context.WithValue(context.Background(), dnsserver.Key{}, &dnsserver.Server{Addr: "dns://:1053"})
	for range 3 {
		c.Inc(one, Answer)
	}
	c.Inc(one, NXDomain)
	c.Inc(two, Answer)
	for _, tc := range []struct {
		server string
		res    Result
		want   float64
	}{
		{"dns://:53", Answer, 3},
		{"dns://:53", NXDomain, 1},
		{"dns://:1053", Answer, 1},
		{"dns://:1053", NXDomain, 0},
	} {
		if got := testutil.ToFloat64(vec.WithLabelValues(tc.server, string(tc.res))); got != tc.want {
			t.Errorf("requests_total{server=%q,result=%q} = %v, want %v", tc.server, tc.res, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { c.Inc(one, Answer) }); n != 0 {
		t.Errorf("Inc of a known pair allocated %v times, want 0", n)
	}
}
