// Command fakeapi stands in for a kube-apiserver behind haproxy in the e2e
// lab, and is also the client that measures the API VIP from outside.
//
//	fakeapi serve -listen ADDR -name NODE [-readyz-delay D]
//	    HTTPS with a throwaway self-signed certificate: /readyz answers 200
//	    "ok" (after D, a loaded apiserver's slow readiness checks),
//	    everything else "hello from NODE".
//	fakeapi probe -url URL [-interval 20ms] [-timeout 500ms] [-open] [-bearer TOKEN]
//	    one GET per interval, each on a new connection (a kept-alive
//	    connection would hide a VIP move), one line per request on stdout:
//	    "START_UNIX_NANO END_UNIX_NANO ok BODY" or "... fail ERROR".
//	    With -open a request starts every interval even while earlier ones
//	    wait (an open loop, as many independent clients): a stalled request
//	    does not hold back the ones after it. -bearer sends the token (a
//	    real kube-apiserver's /readyz behind the VIP).
//	fakeapi resolve -names N1,N2 [-interval 50ms] [-timeout 3s] [-server HOST:PORT]
//	    one lookup per interval, the names in turn, through Go's stub
//	    resolver and this host's /etc/resolv.conf (its nameservers in
//	    order, the next one when one refuses or times out, as a node's
//	    processes resolve); the same line format with "NAME=ADDR,ADDR".
//	    -server asks that server alone.
//	fakeapi hold -addr HOST:PORT [-interval 100ms] [-timeout 2s] [-conns N]
//	    one TLS connection, dialled once, with an HTTP/1.1 GET / on it every
//	    interval; the same line format plus the connection's local address.
//	    The first failure ends the program: it never redials, so every "ok"
//	    line is proof that the first connection is still being served.
//	    With -conns N, N such connections at once, each ended by its own
//	    first failure.
package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fakeapi serve|probe|hold [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "probe":
		err = probe(os.Args[2:])
	case "hold":
		err = hold(os.Args[2:])
	case "resolve":
		err = resolve(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeapi:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", ":6443", "address to listen on")
	name := fs.String("name", "", "node name to answer with")
	plain := fs.Bool("http", false, "plain HTTP (an ingress router's stats port) instead of TLS")
	readyzDelay := fs.Duration("readyz-delay", 0, "time /readyz takes to answer")
	_ = fs.Parse(args)
	cert, err := selfSigned()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(*readyzDelay)
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "hello from %s", *name) })
	srv := &http.Server{
		Addr:              *listen,
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 5 * time.Second,
	}
	fmt.Printf("serving %s on %s\n", *name, *listen)
	if *plain {
		return srv.ListenAndServe()
	}
	return srv.ListenAndServeTLS("", "")
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "fakeapi"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func probe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ExitOnError)
	url := fs.String("url", "", "URL to GET")
	interval := fs.Duration("interval", 20*time.Millisecond, "time between request starts")
	timeout := fs.Duration("timeout", 500*time.Millisecond, "per-request timeout")
	open := fs.Bool("open", false, "start a request every interval even while earlier ones wait")
	bearer := fs.String("bearer", "", "a bearer token to send")
	_ = fs.Parse(args)
	if *url == "" {
		return fmt.Errorf("probe: -url is required")
	}
	c := &http.Client{
		Timeout: *timeout,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the lab's throwaway certificates
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if step, ok := ctx.Value(stepKey{}).(func(string)); ok && err == nil {
					step("tcp(" + c.LocalAddr().String() + ")")
				}
				return c, err
			},
		},
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex // out, when requests overlap
	one := func() error {
		start := time.Now()
		status := "ok"
		detail, err := get(c, *url, *bearer)
		if err != nil {
			status, detail = "fail", err.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%d %d %s %s\n", start.UnixNano(), time.Now().UnixNano(), status,
			strings.Join(strings.Fields(detail), "_"))
		// Flushed per line: the test reads the log while the probe runs.
		return out.Flush()
	}
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	errs := make(chan error, 1)
	for range tick.C {
		if !*open {
			if err := one(); err != nil {
				return err
			}
			continue
		}
		select {
		case err := <-errs:
			return err
		default:
		}
		go func() {
			if err := one(); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		}()
	}
	return nil
}

// stepKey carries get's step recorder to the probe's dialer.
type stepKey struct{}

func get(c *http.Client, url, bearer string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	// How far a failed request got, and on which connection: a lost
	// packet's place (handshake, TLS, answer) and the client's port to
	// look for in the nodes' counters.
	start := time.Now()
	var mu sync.Mutex
	var steps []string
	step := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, fmt.Sprintf("%s+%dms", s, time.Since(start).Milliseconds()))
	}
	req = req.WithContext(httptrace.WithClientTrace(context.WithValue(req.Context(), stepKey{}, step), &httptrace.ClientTrace{
		TLSHandshakeStart:    func() { step("tls") },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { step("tls-done") },
		WroteRequest:         func(httptrace.WroteRequestInfo) { step("wrote") },
		GotFirstResponseByte: func() { step("answer") },
	}))
	resp, err := c.Do(req)
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		return "", fmt.Errorf("%w [%s]", err, strings.Join(steps, " "))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), nil
}

func hold(args []string) error {
	fs := flag.NewFlagSet("hold", flag.ExitOnError)
	addr := fs.String("addr", "", "HOST:PORT to connect to")
	interval := fs.Duration("interval", 100*time.Millisecond, "time between request starts")
	timeout := fs.Duration("timeout", 2*time.Second, "dial and per-request timeout")
	conns := fs.Int("conns", 1, "connections held at once, each its own client")
	_ = fs.Parse(args)
	if *addr == "" {
		return fmt.Errorf("hold: -addr is required")
	}
	if *conns < 1 {
		return fmt.Errorf("hold: -conns %d", *conns)
	}
	out := &lines{w: bufio.NewWriter(os.Stdout)}
	if *conns == 1 {
		return holdOne(*addr, *interval, *timeout, out)
	}
	// Several: each connection ends at its first failure, the program
	// when all have (or never, while one is served).
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := holdOne(*addr, *interval, *timeout, out); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	wg.Wait()
	return fmt.Errorf("hold: every connection failed")
}

// lines writes whole lines from several goroutines.
type lines struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lines) printf(format string, args ...any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
	return l.w.Flush()
}

// holdOne dials one connection and makes a request on it every interval
// until one fails.
func holdOne(addr string, interval, timeout time.Duration, out *lines) error {
	d := &net.Dialer{Timeout: timeout}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the lab's throwaway certificates
	if err != nil {
		return fmt.Errorf("hold: %w", err)
	}
	defer c.Close()
	local := c.LocalAddr().String()
	br := bufio.NewReader(c)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for range tick.C {
		start := time.Now()
		body, err := holdGet(c, br, addr, start.Add(timeout))
		status, detail := "ok", body
		if err != nil {
			status, detail = "fail", err.Error()
		}
		if ferr := out.printf("%d %d %s %s %s\n", start.UnixNano(), time.Now().UnixNano(), status,
			strings.Join(strings.Fields(detail), "_"), local); ferr != nil {
			return ferr
		}
		if err != nil {
			return fmt.Errorf("hold: connection from %s: %w", local, err)
		}
	}
	return nil
}

// holdGet is one request on the held connection, written by hand so that
// nothing can quietly open a second one.
func holdGet(c *tls.Conn, br *bufio.Reader, host string, deadline time.Time) (string, error) {
	if err := c.SetDeadline(deadline); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.Close {
		return "", fmt.Errorf("the server closes the connection after this response")
	}
	return string(b), nil
}

func resolve(args []string) error {
	fs := flag.NewFlagSet("resolve", flag.ExitOnError)
	names := fs.String("names", "", "comma-separated names to look up in turn")
	interval := fs.Duration("interval", 50*time.Millisecond, "time between lookup starts")
	timeout := fs.Duration("timeout", 3*time.Second, "per-lookup timeout (all nameservers)")
	server := fs.String("server", "", "HOST:PORT of the one server to ask (default: resolv.conf's)")
	_ = fs.Parse(args)
	if *names == "" {
		return fmt.Errorf("resolve: -names is required")
	}
	list := strings.Split(*names, ",")
	r := &net.Resolver{PreferGo: true}
	if *server != "" {
		var d net.Dialer
		r.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, *server)
		}
	}
	out := bufio.NewWriter(os.Stdout)
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		<-tick.C
		name := list[i%len(list)]
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		addrs, err := r.LookupNetIP(ctx, "ip4", name)
		cancel()
		status, detail := "ok", ""
		if err != nil {
			status, detail = "fail", name+"="+err.Error()
		} else {
			var as []string
			for _, a := range addrs {
				as = append(as, a.String())
			}
			detail = name + "=" + strings.Join(as, ",")
		}
		fmt.Fprintf(out, "%d %d %s %s\n", start.UnixNano(), time.Now().UnixNano(), status, strings.Join(strings.Fields(detail), "_"))
		if err := out.Flush(); err != nil {
			return err
		}
	}
}
