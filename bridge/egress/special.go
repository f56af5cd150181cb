package egress

import "net/netip"

// notPublic are the address blocks of IANA's special-purpose registries
// (IPv4: RFC 6890 and its updates; IPv6 likewise) that are not globally
// reachable, plus those that embed or translate to an IPv4 address (so an
// allowed name cannot reach a private IPv4 address through them) and the
// documentation, benchmarking and reserved blocks. Multicast and other
// non-unicast addresses are refused before this list is read, and an
// IPv4-mapped address (::ffff:a.b.c.d) is read as its IPv4 address.
var notPublic = prefixes(
	// IPv4
	"0.0.0.0/8",          // "this network"
	"10.0.0.0/8",         // private use
	"100.64.0.0/10",      // shared address space (carrier-grade NAT; cloud metadata lives here on some clouds)
	"127.0.0.0/8",        // loopback
	"169.254.0.0/16",     // link local (cloud metadata 169.254.169.254)
	"172.16.0.0/12",      // private use
	"192.0.0.0/24",       // IETF protocol assignments
	"192.0.2.0/24",       // documentation (TEST-NET-1)
	"192.88.99.0/24",     // deprecated 6to4 relay anycast
	"192.168.0.0/16",     // private use
	"198.18.0.0/15",      // benchmarking
	"198.51.100.0/24",    // documentation (TEST-NET-2)
	"203.0.113.0/24",     // documentation (TEST-NET-3)
	"240.0.0.0/4",        // reserved
	"255.255.255.255/32", // limited broadcast
	// IPv6
	"::/128",       // unspecified
	"::1/128",      // loopback
	"::/96",        // IPv4-compatible (deprecated)
	"64:ff9b::/96", // IPv4/IPv6 translation (NAT64 reaches IPv4 behind it)
	"64:ff9b:1::/48",
	"100::/64",      // discard only
	"2001::/23",     // IETF protocol assignments (Teredo, ORCHID, benchmarking…)
	"2001:db8::/32", // documentation
	"2002::/16",     // 6to4 (embeds an IPv4 address)
	"3fff::/20",     // documentation
	"5f00::/16",     // segment routing SIDs
	"fc00::/7",      // unique local
	"fe80::/10",     // link local
	"fec0::/10",     // site local (deprecated)
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// public reports whether a is an ordinary, globally reachable unicast
// address: off this host, off private and shared networks, and in none of
// the special-purpose blocks above.
func public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
