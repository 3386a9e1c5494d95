// Command mdns-publisher announces this node's name and addresses over
// multicast DNS (RFC 6762/6763) so that every node's CoreDNS (plugin
// mdnsnodes) can resolve it without the Kubernetes API.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/mdns"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// version is set by the Makefile from git describe.
var version = "dev"

func main() {
	err := run(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return // -h: the flags were printed; asking for help is no failure
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdns-publisher:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mdns-publisher", flag.ContinueOnError)
	host, _ := os.Hostname()
	var f options
	fs.StringVar(&f.hostname, "hostname", host, "host name to publish; the part before the first dot is used")
	fs.StringVar(&f.iface, "interface", "", "interface to publish on (its addresses are announced)")
	fs.StringVar(&f.bind, "bind-address", "", "publish on the interface that holds this address")
	fs.StringVar(&f.cluster, "cluster", "", "cluster name, carried in the TXT record and the instance name")
	fs.StringVar(&f.keyFile, "key", "", "shared key file: sign announcements (HMAC-SHA256)")
	ttl := fs.Uint("ttl", mdns.HostTTL, "TTL of the address records, seconds")
	fs.StringVar(&f.collision, "collision-avoidance", mdns.CollisionInaction, "on a name conflict: inaction or hostname")
	fs.BoolVar(&f.linkLocal, "link-local", false, "announce IPv6 link-local addresses too")
	fs.Func("exclude-address", "never announce this address (a VIP on the same interface); repeat for more", func(s string) error {
		f.exclude = append(f.exclude, s)
		return nil
	})
	configPath := fs.String("config", "", "YAML config file (OpenShift mdns-publisher keys)")
	metricsAddr := fs.String("metrics-address", "", "serve Prometheus metrics on this address (e.g. :9154); empty: off")
	debug := fs.Bool("debug", false, "log at debug level")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println("mdns-publisher", version)
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if *ttl == 0 || *ttl > 3600 {
		return fmt.Errorf("--ttl must be in 1..3600, got %d", *ttl)
	}
	f.ttl = uint32(*ttl)
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var file fileConfig
	if *configPath != "" {
		var err error
		if file, err = loadConfig(*configPath); err != nil {
			return err
		}
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	opts := merge(file, f, set)
	opts.warn = func(s string) { log.Warn(s) }
	cfg, err := opts.responderConfig()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	cfg.Logger = log
	cfg.Events = func(e string) { m.events.WithLabelValues(e).Inc() }
	r, err := mdns.NewResponder(cfg)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("metrics listener: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "error", err)
			}
		}()
		defer srv.Close()
	}
	log.Info("starting", "version", version)
	return r.Run(ctx)
}
