package main

import (
	"testing"

	"github.com/miekg/dns"
)

func TestAcceptMsg(t *testing.T) {
	const qr = 1 << 15
	op := func(o int) uint16 { return uint16(o) << 11 }
	tests := []struct {
		name string
		h    dns.Header
		want dns.MsgAcceptAction
	}{
		{"query", dns.Header{Qdcount: 1, Arcount: 1}, dns.MsgAccept},
		{"notify", dns.Header{Bits: op(dns.OpcodeNotify), Qdcount: 1, Ancount: 1}, dns.MsgAccept},
		// Parsed so that CoreDNS answers NOTIMP with the OPT echoed.
		{"update with a zone", dns.Header{Bits: op(dns.OpcodeUpdate), Qdcount: 1, Nscount: 3, Arcount: 1}, dns.MsgAccept},
		{"iquery with a question", dns.Header{Bits: op(dns.OpcodeIQuery), Qdcount: 1, Arcount: 1}, dns.MsgAccept},
		{"status", dns.Header{Bits: op(dns.OpcodeStatus), Qdcount: 1}, dns.MsgAccept},
		{"unassigned opcode", dns.Header{Bits: op(15), Qdcount: 1}, dns.MsgAccept},
		// Unchanged from miekg/dns.
		{"other opcode without a question", dns.Header{Bits: op(dns.OpcodeIQuery), Ancount: 1}, dns.MsgRejectNotImplemented},
		{"response", dns.Header{Bits: qr, Qdcount: 1}, dns.MsgIgnore},
		{"update response", dns.Header{Bits: qr | op(dns.OpcodeUpdate), Qdcount: 1}, dns.MsgIgnore},
		{"no question", dns.Header{}, dns.MsgReject},
		{"two questions", dns.Header{Qdcount: 2}, dns.MsgReject},
		{"query with answers", dns.Header{Qdcount: 1, Ancount: 2}, dns.MsgReject},
		// A header-only reply would drop the OPT record the request may
		// carry (RFC 6891 section 7): no reply instead.
		{"no question, with EDNS", dns.Header{Arcount: 1}, dns.MsgIgnore},
		{"two questions, with EDNS", dns.Header{Qdcount: 2, Arcount: 1}, dns.MsgIgnore},
		{"three additional records", dns.Header{Qdcount: 1, Arcount: 3}, dns.MsgIgnore},
		{"other opcode without a question, with EDNS", dns.Header{Bits: op(dns.OpcodeStatus), Arcount: 1}, dns.MsgIgnore},
	}
	for _, tc := range tests {
		if got := acceptMsg(tc.h); got != tc.want {
			t.Errorf("%s: acceptMsg = %d, want %d", tc.name, got, tc.want)
		}
	}
	if dns.DefaultMsgAcceptFunc == nil || dns.DefaultMsgAcceptFunc(dns.Header{Bits: op(dns.OpcodeStatus), Qdcount: 1}) != dns.MsgAccept {
		t.Error("Expected init to install acceptMsg as dns.DefaultMsgAcceptFunc")
	}
}
