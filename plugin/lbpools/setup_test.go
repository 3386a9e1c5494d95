package lbpools

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // fields, or the error
	}{
		{"lbpools {\n kubeconfig /k\n identity cp-0\n}",
			"kc=/k pools=infradns/lb-pools class=infradns.io/lb default=false lease=infradns/lb-allocator 15s id=cp-0"},
		{"lbpools {\n kubeconfig /k\n pools kube-system/pools\n class example.com/x\n default\n lease kube-system/alloc 5s\n identity cp-1\n}",
			"kc=/k pools=kube-system/pools class=example.com/x default=true lease=kube-system/alloc 5s id=cp-1"},
		{"lbpools {\n kubeconfig /k\n lease kube-system/alloc\n identity a\n}",
			"kc=/k pools=infradns/lb-pools class=infradns.io/lb default=false lease=kube-system/alloc 15s id=a"},
		{"lbpools {\n pools a/b\n}", "the 'kubeconfig FILE' option is required"},
		{"lbpools x {\n kubeconfig /k\n}", "Wrong argument count"},
		{"lbpools {\n kubeconfig /k\n kubeconfig /j\n}", "kubeconfig"},
		{"lbpools {\n kubeconfig /k\n pools lb-pools\n}", "want the ConfigMap as NAMESPACE/NAME"},
		{"lbpools {\n kubeconfig /k\n lease a/b 1s\n}", `lease duration "1s": want a duration from 3s to 5m`},
		{"lbpools {\n kubeconfig /k\n lease a/b 15\n}", `lease duration "15"`},
		{"lbpools {\n kubeconfig /k\n class lb\n}", `"lb" is not a load-balancer class`},
		{"lbpools {\n kubeconfig /k\n default yes\n}", "Wrong argument count"},
		{"lbpools {\n kubeconfig /k\n announce\n identity a\n}", "announce=true"},
		{"lbpools {\n kubeconfig /k\n announce bgp\n}", "Wrong argument count"},
		{"lbpools {\n kubeconfig /k\n identity Bad_Name\n}", "identity"},
		{"lbpools {\n kubeconfig /k\n zone x\n}", "unknown property 'zone'"},
		{"lbpools {\n kubeconfig /k\n}\nlbpools {\n kubeconfig /k\n}", "can only be used once"},
	} {
		l, err := parse(caddy.NewTestController("dns", tc.in))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = "kc=" + l.kubeconfig + " pools=" + l.poolsNS + "/" + l.poolsName + " class=" + l.class +
				" default=" + map[bool]string{true: "true", false: "false"}[l.isDefault] +
				" lease=" + l.leaseNS + "/" + l.leaseName + " " + l.leaseDuration.String() + " id=" + l.identity +
				map[bool]string{true: " announce=true"}[l.announce]
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("parse(%q):\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
	l, err := parse(caddy.NewTestController("dns", "lbpools {\n kubeconfig /k\n}"))
	h, _ := os.Hostname()
	if err != nil || !strings.HasPrefix(l.identity, strings.ToLower(h)+"_") || l.retry != time.Second {
		t.Errorf("defaults: identity %q retry %v err %v; want HOST_SUFFIX, 1s", l.identity, l.retry, err)
	}
	// Two instances on one host (or hosts of one name) must not share an
	// identity: both would take the Lease as theirs.
	if m, err := parse(caddy.NewTestController("dns", "lbpools {\n kubeconfig /k\n}")); err != nil || m.identity == l.identity {
		t.Errorf("two default identities %q and %q (%v), want them different", l.identity, m.identity, err)
	}
}
