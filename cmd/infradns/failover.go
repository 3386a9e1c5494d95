package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
)

// hypervisors are the DMI vendor and product strings of the common
// hypervisors, as the kernel exposes them in /sys/class/dmi/id (what
// systemd-detect-virt reads first), with the name to print.
var hypervisors = []struct{ match, name string }{
	{"VMware", "VMware"},
	{"QEMU", "QEMU/KVM"},
	{"KVM", "KVM"},
	{"OpenStack", "OpenStack (KVM)"},
	{"oVirt", "oVirt/RHV (KVM)"},
	{"RHEV", "oVirt/RHV (KVM)"},
	{"Red Hat", "Red Hat virtualization (KVM)"},
	{"Nutanix", "Nutanix AHV"},
	{"Microsoft Corporation", "Hyper-V"},
	{"Xen", "Xen"},
	{"innotek", "VirtualBox"},
	{"VirtualBox", "VirtualBox"},
	{"Parallels", "Parallels"},
	{"Amazon EC2", "Amazon EC2"},
	{"Google Compute Engine", "Google Compute Engine"},
}

// virtualization names the hypervisor a node runs under from its DMI
// strings (sys_vendor, product_name, in that order) and /proc/cpuinfo, or
// "" on bare metal. The cpuinfo "hypervisor" flag catches a hypervisor
// whose DMI strings are not in the list.
func virtualization(dmi []string, cpuinfo []byte) string {
	for _, s := range dmi {
		for _, h := range hypervisors {
			if strings.Contains(s, h.match) {
				if h.match == "Microsoft Corporation" && !strings.Contains(strings.Join(dmi, " "), "Virtual Machine") {
					continue // Surface and other Microsoft hardware
				}
				return h.name
			}
		}
	}
	for _, line := range bytes.Split(cpuinfo, []byte("\n")) {
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && string(bytes.TrimSpace(k)) == "flags" {
			for _, f := range bytes.Fields(v) {
				if string(f) == "hypervisor" {
					return "a hypervisor (the CPU's hypervisor flag)"
				}
			}
			break
		}
	}
	return ""
}

// readVirtualization is virtualization of the node under root.
func readVirtualization(under func(string) string) string {
	var dmi []string
	for _, f := range []string{"sys_vendor", "product_name"} {
		b, _ := os.ReadFile(under("/sys/class/dmi/id/" + f))
		dmi = append(dmi, strings.TrimSpace(string(b)))
	}
	cpuinfo, _ := os.ReadFile(under("/proc/cpuinfo"))
	return virtualization(dmi, cpuinfo)
}

// checkFailover says whether the failover profile fits the node: fast on a
// virtual machine moves the VIPs at every stun or live migration longer
// than the master-down interval (0.19 s), which stable (1 s adverts) rides
// out.
func checkFailover(s cluster.Spec, virt string) finding {
	const check = "failover"
	if s.Mode == cluster.ModeBGP {
		return finding{pass, check, "BGP mode: BFD and the BGP hold timer decide, not VRRP", ""}
	}
	md := lb.MasterDown(s.VRRP.AdvertInterval).Round(10 * time.Millisecond)
	where := "bare metal"
	if virt != "" {
		where = "a virtual machine (" + virt + ")"
	}
	detail := fmt.Sprintf("%s on %s: %s adverts, a holder stopped or paused for more than %s loses its VIPs", s.VRRP.Failover, where, s.VRRP.AdvertInterval, md)
	if virt != "" && md < time.Second {
		return finding{warn, check, detail + "; a VM stun or live migration usually takes longer",
			fmt.Sprintf("failover: %s in the cluster file (every node) if this hypervisor live-migrates or is oversubscribed: a pause under %s moves nothing, a crash moves the VIPs after ~%s instead of ~%s", cluster.FailoverStable,
				lb.MasterDown(cluster.StableAdvertInterval).Round(10*time.Millisecond), lb.MasterDown(cluster.StableAdvertInterval).Round(100*time.Millisecond), md)}
	}
	return finding{pass, check, detail, ""}
}
