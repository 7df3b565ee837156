package kubecfg

import (
	"net/netip"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/openclaw/occ/internal/config"
)

// FuzzFromSection: any section text either fails with a message or yields
// a Config that validates again, whose image pull Secrets' copies are
// distinct Secret names, and whose model egress exceptions parse and
// lie inside the address family of the block they are rendered into (the
// API server refuses an IPBlock whose except is outside its CIDR).
func FuzzFromSection(f *testing.F) {
	for _, seed := range []string{
		"{}",
		"network: {gatewayClients: [10.0.0.0/8]}\nruntime: {gatewayImage: gw, occImage: occ}\n",
		"network: {gatewayClients: [10.0.0.0/8], modelEgressExcept: [203.0.113.0/24, '2001:db8::/64', '::ffff:198.51.100.0/120']}\nruntime: {gatewayImage: gw, occImage: occ}\n",
		"network: {gatewayClients: [10.0.0.0/8], modelEgressExcept: [0.0.0.0/0]}\nruntime: {gatewayImage: gw, occImage: occ}\n",
		"gatewayRouting: {gatewayName: g, gatewayNamespace: n, envoyNamespace: e}\nnetwork: {gatewayTrustedProxyCidrs: [10.244.0.0/16]}\nruntime: {gatewayImage: gw, occImage: occ}\n",
		"network: [1, 2]",
		"network: {gatewayClients: [10.0.0.0/8]}\nruntime: {gatewayImage: gw, occImage: occ, imagePullSecrets: [regcred, mirror.example.com], imagePullSecretsNamespace: occ}\n",
		"network: {gatewayClients: [10.0.0.0/8]}\nruntime: {gatewayImage: gw, occImage: occ, imagePullSecrets: [regcred, regcred], imagePullSecretsNamespace: occ}\n",
		"network: {gatewayClients: [10.0.0.0/8]}\nruntime: {gatewayImage: gw, occImage: occ, imagePullSecrets: [regcred]}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
			return
		}
		s := &config.Section{Key: "drivers.compute.kubernetes", Node: yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}}
		if len(doc.Content) > 0 {
			s.Node = *doc.Content[0]
		}
		c, err := FromSection(s)
		if err != nil {
			if err.Error() == "" {
				t.Errorf("FromSection(%q) failed with an empty message", text)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Errorf("FromSection(%q) accepted %+v, which does not validate: %v", text, c, err)
		}
		// Each image pull Secret's copy is a Secret name of its own.
		copies := map[string]bool{}
		for _, name := range c.Runtime.ImagePullSecrets {
			cp := ImagePullSecretCopyName(name)
			if msgs := validation.IsDNS1123Subdomain(cp); len(msgs) > 0 || copies[cp] {
				t.Errorf("FromSection(%q): the copy %q of image pull Secret %q is not a Secret name of its own: %v", text, cp, name, msgs)
			}
			copies[cp] = true
		}
		v4, v6 := c.Network.ModelEgressExceptions()
		for _, list := range []struct {
			cidrs []string
			is4   bool
		}{{v4, true}, {v6, false}} {
			for _, s := range list.cidrs {
				p, err := netip.ParsePrefix(s)
				if err != nil || p.Addr().Is4() != list.is4 || p.Bits() == 0 {
					t.Errorf("FromSection(%q): model egress exception %q is not a non-empty range of its block's family", text, s)
				}
			}
		}
	})
}
