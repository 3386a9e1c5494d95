package nodecfg

import (
	"encoding/base64"
	"fmt"

	"sigs.k8s.io/yaml"
)

// OpenShift delivers node files with MachineConfigs: the Machine Config
// Operator writes them through Ignition and keeps them as written. What
// render-node writes under / becomes one MachineConfig (or its Butane
// source) per pool, so an OpenShift administrator installs infradns the way
// every node file is installed there.

// Formats of render-node's output besides the file tree.
const (
	FormatFiles         = "files"
	FormatMachineConfig = "machineconfig"
	FormatButane        = "butane"
)

// IgnitionVersion is the Ignition spec the MachineConfigs carry (OpenShift
// 4.8 and later accept it).
const IgnitionVersion = "3.2.0"

// ButaneVersion is the Butane openshift variant's version used.
const ButaneVersion = "4.14.0"

// MachineConfig is the part of machineconfiguration.openshift.io/v1
// MachineConfig this output fills.
type MachineConfig struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       struct {
		Config Ignition `json:"config"`
	} `json:"spec"`
}

// ObjectMeta is the name and labels of a MachineConfig or Butane config.
type ObjectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// Ignition is the part of an Ignition config the files need.
type Ignition struct {
	Ignition struct {
		Version string `json:"version"`
	} `json:"ignition"`
	Storage struct {
		Files []IgnitionFile `json:"files"`
	} `json:"storage"`
}

// IgnitionFile is one file: its contents as a data URL, its mode in decimal.
type IgnitionFile struct {
	Path      string `json:"path"`
	Mode      int    `json:"mode"`
	Overwrite bool   `json:"overwrite"`
	Contents  struct {
		Source string `json:"source"`
	} `json:"contents"`
}

// Butane is an openshift-variant Butane config with the same files inline.
type Butane struct {
	Variant  string     `json:"variant"`
	Version  string     `json:"version"`
	Metadata ObjectMeta `json:"metadata"`
	Storage  struct {
		Files []ButaneFile `json:"files"`
	} `json:"storage"`
}

// ButaneFile is one file of a Butane config.
type ButaneFile struct {
	Path      string `json:"path"`
	Mode      int    `json:"mode"`
	Overwrite bool   `json:"overwrite"`
	Contents  struct {
		Inline string `json:"inline"`
	} `json:"contents"`
}

// Pool is the MachineConfigPool of a role: master for the control plane,
// worker for workers. A bootstrap node has none (the installer's Ignition
// sets it up and it is gone once the cluster runs).
func Pool(role string) (string, error) {
	switch role {
	case ControlPlane:
		return "master", nil
	case Worker:
		return "worker", nil
	}
	return "", fmt.Errorf("role %s has no MachineConfigPool: only %s (master) and %s (worker) nodes get MachineConfigs", role, ControlPlane, Worker)
}

// MachineConfigName is the name of a pool's MachineConfig: 50- orders it
// after OpenShift's own on-prem files (00-, 01-) so ours win a clash.
func MachineConfigName(pool string) string { return "50-" + pool + "-infradns" }

// mcFiles are the files a MachineConfig may own: everything but the seeds
// (forward.conf), which the dispatcher script rewrites at every network
// change; the Machine Config Operator would report that as drift and
// degrade the pool.
func mcFiles(outs []Output) []Output {
	var out []Output
	for _, o := range outs {
		if !o.Seed {
			out = append(out, o)
		}
	}
	return out
}

// RenderMachineConfig is role's files as a MachineConfig, in YAML.
func RenderMachineConfig(role string, outs []Output) ([]byte, error) {
	pool, err := Pool(role)
	if err != nil {
		return nil, err
	}
	mc := MachineConfig{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig",
		Metadata: ObjectMeta{Name: MachineConfigName(pool), Labels: map[string]string{"machineconfiguration.openshift.io/role": pool}}}
	mc.Spec.Config.Ignition.Version = IgnitionVersion
	for _, o := range mcFiles(outs) {
		f := IgnitionFile{Path: o.Path, Mode: int(o.Mode.Perm()), Overwrite: true}
		f.Contents.Source = "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(o.Data)
		mc.Spec.Config.Storage.Files = append(mc.Spec.Config.Storage.Files, f)
	}
	return yaml.Marshal(mc)
}

// RenderButane is role's files as a Butane config (`butane` turns it into
// the MachineConfig; the files stay readable in review).
func RenderButane(role string, outs []Output) ([]byte, error) {
	pool, err := Pool(role)
	if err != nil {
		return nil, err
	}
	b := Butane{Variant: "openshift", Version: ButaneVersion,
		Metadata: ObjectMeta{Name: MachineConfigName(pool), Labels: map[string]string{"machineconfiguration.openshift.io/role": pool}}}
	for _, o := range mcFiles(outs) {
		f := ButaneFile{Path: o.Path, Mode: int(o.Mode.Perm()), Overwrite: true}
		f.Contents.Inline = string(o.Data)
		b.Storage.Files = append(b.Storage.Files, f)
	}
	return yaml.Marshal(b)
}
