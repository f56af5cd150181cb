package egress

import (
	"net/netip"
	"testing"
)

// TestPublicRefusesSpecialPurpose: every special-purpose block of both
// families is refused, and ordinary addresses next to them are not.
func TestPublicRefusesSpecialPurpose(t *testing.T) {
	t.Parallel()
	refused := []string{
		"0.1.2.3", "10.1.2.3", "100.64.0.1", "100.100.100.200", "100.127.255.254", "127.0.0.1",
		"169.254.169.254", "172.16.0.1", "172.31.255.255", "192.0.0.9", "192.0.2.1", "192.88.99.1",
		"192.168.1.1", "198.18.0.1", "198.19.255.255", "198.51.100.7", "203.0.113.9", "224.0.0.1",
		"240.0.0.1", "255.255.255.255",
		"::", "::1", "::10.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a00:1",
		"64:ff9b::8.8.8.8", "64:ff9b:1::1", "100::1", "2001::1", "2001:db8::1", "2002:a00:1::1",
		"3fff::1", "5f00::1", "fc00::1", "fd00:ec2::254", "fe80::1", "fec0::1", "ff02::1",
	}
	for _, s := range refused {
		if public(netip.MustParseAddr(s)) {
			t.Errorf("%s counted as public", s)
		}
	}
	allowed := []string{"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "172.32.0.1", "198.20.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001::1", "2400:cb00::1"}
	for _, s := range allowed {
		if !public(netip.MustParseAddr(s)) {
			t.Errorf("%s refused", s)
		}
	}
}
