package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
)

func TestVirtualization(t *testing.T) {
	const metal = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr sse2\n"
	const guest = "processor\t: 0\nflags\t\t: fpu vme de pse hypervisor tsc\n"
	for _, tc := range []struct {
		name    string
		dmi     []string
		cpuinfo string
		want    string
	}{
		{"bare metal", []string{"Dell Inc.", "PowerEdge R650"}, metal, ""},
		{"vSphere", []string{"VMware, Inc.", "VMware7,1"}, guest, "VMware"},
		{"KVM (libvirt)", []string{"QEMU", "Standard PC (Q35 + ICH9, 2009)"}, guest, "QEMU/KVM"},
		{"RHV", []string{"Red Hat", "RHEV Hypervisor"}, guest, "Red Hat virtualization (KVM)"},
		{"OpenStack", []string{"OpenStack Foundation", "OpenStack Nova"}, guest, "OpenStack (KVM)"},
		{"Hyper-V", []string{"Microsoft Corporation", "Virtual Machine"}, guest, "Hyper-V"},
		{"Microsoft hardware is no VM", []string{"Microsoft Corporation", "Surface Pro"}, metal, ""},
		{"unknown hypervisor, cpu flag", []string{"Acme", "Cloud VM"}, guest, "a hypervisor (the CPU's hypervisor flag)"},
		{"no DMI (containers, ARM)", []string{"", ""}, metal, ""},
	} {
		if got := virtualization(tc.dmi, []byte(tc.cpuinfo)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCheckFailover(t *testing.T) {
	spec := func(failover string) cluster.Spec {
		s := cluster.Spec{Name: "ocp4", APIVIPs: []netip.Addr{netip.MustParseAddr("192.0.2.5")}, Node: "master-0", Interface: "ens3"}
		s.VRRP.Failover = failover
		m, err := cluster.New(s)
		if err != nil {
			t.Fatal(err)
		}
		return m.Spec()
	}
	bgp := spec("")
	bgp.Mode = cluster.ModeBGP
	for _, tc := range []struct {
		name    string
		spec    cluster.Spec
		virt    string
		verdict string
		detail  string
	}{
		{"fast on bare metal", spec(""), "", pass, "fast on bare metal: 60ms adverts, a holder stopped or paused for more than 190ms loses its VIPs"},
		{"fast on a VM", spec("fast"), "VMware", warn, "fast on a virtual machine (VMware): 60ms adverts, a holder stopped or paused for more than 190ms"},
		{"stable on a VM", spec("stable"), "VMware", pass, "stable on a virtual machine (VMware): 1s adverts, a holder stopped or paused for more than 3.18s"},
		{"stable on bare metal", spec("stable"), "", pass, "stable on bare metal"},
		{"bgp", bgp, "KVM", pass, "BGP mode"},
	} {
		got := checkFailover(tc.spec, tc.virt)
		if got.Verdict != tc.verdict || !strings.HasPrefix(got.Detail, tc.detail) || (got.Verdict != pass && !strings.Contains(got.Fix, "failover: stable")) {
			t.Errorf("%s: %+v, want %s %q...", tc.name, got, tc.verdict, tc.detail)
		}
	}
	if md := lb.MasterDown(60 * time.Millisecond); md < 190*time.Millisecond || md > 192*time.Millisecond {
		t.Errorf("master-down at 60ms adverts = %v, want keepalived's 3 intervals + skew (190.8ms)", md)
	}
}
