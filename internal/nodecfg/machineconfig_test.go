package nodecfg

import (
	"encoding/base64"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestMachineConfig decodes the MachineConfig and Butane outputs strictly
// and checks they carry exactly the file tree render-node writes (bytes and
// modes), but the seed forward.conf, for the right pool.
func TestMachineConfig(t *testing.T) {
	for _, tc := range []struct{ role, pool string }{{ControlPlane, "master"}, {Worker, "worker"}} {
		t.Run(tc.role, func(t *testing.T) {
			f := exampleFile(t)
			f.Role = tc.role
			v, err := f.Values()
			if err != nil {
				t.Fatal(err)
			}
			outs, err := Render(v)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]Output{}
			for _, o := range outs {
				if !o.Seed {
					want[o.Path] = o
				}
			}
			if len(want) == len(outs) || len(want) < 6 {
				t.Fatalf("%d files of %d managed: want every file but the seed", len(want), len(outs))
			}

			b, err := RenderMachineConfig(tc.role, outs)
			if err != nil {
				t.Fatal(err)
			}
			var mc MachineConfig
			if err := yaml.UnmarshalStrict(b, &mc); err != nil {
				t.Fatalf("strict decode: %v\n%s", err, b)
			}
			if mc.APIVersion != "machineconfiguration.openshift.io/v1" || mc.Kind != "MachineConfig" ||
				mc.Metadata.Name != "50-"+tc.pool+"-infradns" || mc.Metadata.Labels["machineconfiguration.openshift.io/role"] != tc.pool ||
				mc.Spec.Config.Ignition.Version != IgnitionVersion {
				t.Errorf("header %+v", mc.Metadata)
			}
			got := map[string]bool{}
			for _, file := range mc.Spec.Config.Storage.Files {
				o, ok := want[file.Path]
				data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(file.Contents.Source, "data:text/plain;charset=utf-8;base64,"))
				if !ok || err != nil || string(data) != string(o.Data) || file.Mode != int(o.Mode.Perm()) || !file.Overwrite {
					t.Errorf("MachineConfig file %s (mode %o) differs from the file tree's (%v)", file.Path, file.Mode, err)
				}
				got[file.Path] = true
			}

			b, err = RenderButane(tc.role, outs)
			if err != nil {
				t.Fatal(err)
			}
			var bu Butane
			if err := yaml.UnmarshalStrict(b, &bu); err != nil {
				t.Fatalf("strict decode: %v\n%s", err, b)
			}
			if bu.Variant != "openshift" || bu.Metadata.Name != mc.Metadata.Name || bu.Metadata.Labels["machineconfiguration.openshift.io/role"] != tc.pool {
				t.Errorf("butane header %+v %+v", bu.Variant, bu.Metadata)
			}
			for _, file := range bu.Storage.Files {
				if o, ok := want[file.Path]; !ok || file.Contents.Inline != string(o.Data) || file.Mode != int(o.Mode.Perm()) {
					t.Errorf("Butane file %s differs from the file tree's", file.Path)
				}
			}
			if len(got) != len(want) || len(bu.Storage.Files) != len(want) {
				t.Errorf("MachineConfig has %d files, Butane %d, the tree %d", len(got), len(bu.Storage.Files), len(want))
			}
		})
	}
	if _, err := RenderMachineConfig(Bootstrap, nil); err == nil {
		t.Error("a bootstrap MachineConfig: no error")
	}
}
