package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/infradns/infradns/internal/mdns"

	"go.yaml.in/yaml/v2"
)

// fileConfig is the config file: OpenShift mdns-publisher's keys, plus ours.
type fileConfig struct {
	BindAddress        string          `yaml:"bind_address"`
	CollisionAvoidance string          `yaml:"collision_avoidance"`
	Services           []serviceConfig `yaml:"services"`
	// infradns additions; flags override them.
	Interface string `yaml:"interface"`
	Hostname  string `yaml:"hostname"`
	Cluster   string `yaml:"cluster"`
	KeyFile   string `yaml:"key_file"`
	TTL       uint32 `yaml:"ttl"`
	LinkLocal bool   `yaml:"link_local"`
	// ExcludeAddresses are never announced: the VIPs keepalived adds to the
	// same interface.
	ExcludeAddresses []string `yaml:"exclude_addresses"`
}

type serviceConfig struct {
	Name     string `yaml:"name"`
	HostName string `yaml:"host_name"`
	Type     string `yaml:"type"`
	Domain   string `yaml:"domain"`
	Port     uint16 `yaml:"port"`
	TTL      uint32 `yaml:"ttl"`
}

// loadConfig reads a YAML config file; unknown keys are errors so a typo
// does not silently publish defaults.
func loadConfig(path string) (fileConfig, error) {
	var c fileConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return c, fmt.Errorf("parse config %s: %w", path, err)
	}
	return c, nil
}

// options are the merged flags and config file.
type options struct {
	hostname  string
	iface     string
	bind      string
	cluster   string
	keyFile   string
	ttl       uint32
	collision string
	linkLocal bool
	exclude   []string
	services  []serviceConfig
	// warn receives what is unwise but allowed (a key file others can
	// read); nil drops it.
	warn func(string)
}

// merge lets flags that were set win over the file.
func merge(file fileConfig, flags options, set map[string]bool) options {
	o := options{hostname: file.Hostname, iface: file.Interface, bind: file.BindAddress, cluster: file.Cluster,
		keyFile: file.KeyFile, ttl: file.TTL, collision: file.CollisionAvoidance, linkLocal: file.LinkLocal, exclude: file.ExcludeAddresses, services: file.Services}
	pick := func(name string, dst *string, v string) {
		if set[name] || *dst == "" {
			*dst = v
		}
	}
	pick("hostname", &o.hostname, flags.hostname)
	pick("interface", &o.iface, flags.iface)
	pick("bind-address", &o.bind, flags.bind)
	pick("cluster", &o.cluster, flags.cluster)
	pick("key", &o.keyFile, flags.keyFile)
	pick("collision-avoidance", &o.collision, flags.collision)
	if set["ttl"] || o.ttl == 0 {
		o.ttl = flags.ttl
	}
	if set["link-local"] {
		o.linkLocal = flags.linkLocal
	}
	if set["exclude-address"] {
		o.exclude = flags.exclude
	}
	return o
}

// responderConfig turns options into the engine's configuration.
func (o options) responderConfig() (mdns.ResponderConfig, error) {
	short, _, _ := strings.Cut(o.hostname, ".")
	cfg := mdns.ResponderConfig{Interface: o.iface, Host: short, Cluster: o.cluster, HostTTL: o.ttl, LinkLocal: o.linkLocal, Collision: o.collision}
	for _, s := range o.exclude {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return cfg, fmt.Errorf("exclude address %q: %w", s, err)
		}
		cfg.Exclude = append(cfg.Exclude, a.Unmap())
	}
	if o.bind != "" {
		a, err := netip.ParseAddr(o.bind)
		if err != nil {
			return cfg, fmt.Errorf("bind address %q: %w", o.bind, err)
		}
		cfg.Bind = a
	}
	if o.iface == "" && o.bind == "" {
		return cfg, fmt.Errorf("one of --interface or --bind-address (bind_address) is required")
	}
	for _, s := range o.services {
		svc := mdns.Service{Instance: s.Name, Type: s.Type, Domain: s.Domain, Host: s.HostName, Port: s.Port, TTL: s.TTL}
		if svc.Type == "" {
			svc.Type = mdns.DefaultServiceType
		}
		if svc.Domain == "" {
			svc.Domain = mdns.DefaultDomain
		}
		if svc.Host == "" {
			svc.Host = short + "." + mdns.DefaultDomain
		}
		if svc.Port == 0 {
			svc.Port = mdns.DefaultPort
		}
		cfg.Services = append(cfg.Services, svc)
	}
	if o.keyFile != "" {
		k, err := mdns.LoadKey(o.keyFile, o.warn)
		if err != nil {
			return cfg, err
		}
		cfg.Key = k
	}
	return cfg, nil
}
