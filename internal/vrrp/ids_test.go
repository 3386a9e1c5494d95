package vrrp

import "testing"

func TestClusterIDs(t *testing.T) {
	tests := []struct {
		cluster      string
		api, ingress uint8
	}{
		// Values reported by `runtimecfg vr-ids` in OpenShift bug reports.
		{"ostest", 14, 0},
		{"oc2-yw674", 1, 223},
		{"piyushv6", 214, 0},
	}
	for _, tc := range tests {
		t.Run(tc.cluster, func(t *testing.T) {
			ids, err := ClusterIDs(tc.cluster)
			if err != nil {
				t.Fatal(err)
			}
			if ids.API != tc.api {
				t.Errorf("API id = %d, want %d", ids.API, tc.api)
			}
			if tc.ingress != 0 && ids.Ingress != tc.ingress {
				t.Errorf("Ingress id = %d, want %d", ids.Ingress, tc.ingress)
			}
			if ids.API == ids.Ingress {
				t.Errorf("API and ingress ids are equal: %d", ids.API)
			}
		})
	}
}

func TestClusterIDsEmpty(t *testing.T) {
	if _, err := ClusterIDs(""); err == nil {
		t.Fatal("Expected an error for an empty cluster name")
	}
}

func TestFletcher8Range(t *testing.T) {
	// Every 1- and 2-byte string: the checksum never exceeds 0xEE, so +1 never
	// wraps to the invalid VRID 0.
	for i := 0; i < 256; i++ {
		for j := 0; j < 256; j++ {
			f := Fletcher8(string([]byte{byte(i), byte(j)}))
			if f&0x0f > 14 || f>>4 > 14 {
				t.Fatalf("Fletcher8(%d,%d) = %#x, a nibble exceeds 14", i, j, f)
			}
		}
	}
}

// TestClusterIDsNeverEqual checks every state the checksum can be in after
// any cluster name (225 of them): "-api" and "-ingress" never end in the same
// value, so runtimecfg's equality bump (kept for fidelity) never fires and a
// cluster always gets two distinct IDs.
func TestClusterIDsNeverEqual(t *testing.T) {
	run := func(a, b uint8, s string) uint8 {
		for i := 0; i < len(s); i++ {
			a = (a + s[i]) % 15
			b = (b + a) % 15
		}
		return b<<4 | a
	}
	for a := uint8(0); a < 15; a++ {
		for b := uint8(0); b < 15; b++ {
			if run(a, b, "-api") == run(a, b, "-ingress") {
				t.Errorf("State (%d, %d) gives equal api and ingress checksums", a, b)
			}
		}
	}
}
