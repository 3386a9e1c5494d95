package main

import "github.com/miekg/dns"

// stockAccept is miekg/dns's own accept policy, kept before init replaces it.
var stockAccept = dns.DefaultMsgAcceptFunc

// acceptMsg is the accept policy of every DNS listener of this build (CoreDNS
// leaves dns.Server.MsgAcceptFunc nil, so miekg/dns uses the package
// variable dns.DefaultMsgAcceptFunc, and CoreDNS's own acceptMessage, used
// when a plugin allows an opcode, calls it too). It differs from the stock
// policy in one case: a request with one question and an opcode other than
// QUERY and NOTIFY is accepted and parsed, where miekg/dns answered NOTIMP
// itself from the header alone, dropping the query's OPT record (RFC 6891 §7
// says the reply MUST carry one). Parsed, it reaches CoreDNS's server, whose
// opcode check answers NOTIMP with the OPT echoed (request.SizeAndDo); no
// plugin sees it. Without a question there is nothing to route, and the
// stock reply stays, unless the request has additional records: miekg/dns
// writes its FORMERR or NOTIMP from the header alone and drops the OPT
// record the request may carry, so such a request (QDCOUNT=0 with EDNS, a
// count that lies) gets no reply, which RFC 6891 section 7 allows and
// which Knot answers to many malformed queries too.
func acceptMsg(dh dns.Header) dns.MsgAcceptAction {
	action := stockAccept(dh)
	if action == dns.MsgRejectNotImplemented && dh.Qdcount == 1 {
		return dns.MsgAccept
	}
	if (action == dns.MsgReject || action == dns.MsgRejectNotImplemented) && dh.Arcount > 0 {
		return dns.MsgIgnore
	}
	return action
}
