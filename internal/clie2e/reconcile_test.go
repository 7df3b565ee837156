package clie2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/testutil"
)

// TestNamespaceReconcile: occ namespace reconcile NAME --wait and --all
// --wait against a real server (the "none" driver, whose Namespace
// preparation always succeeds), usage errors, and the audit event.
func TestNamespaceReconcile(t *testing.T) {
	s := startServer(t, "none")
	u := newUser(t)
	u.loginAdmin(s, "--name", "admin")
	u.must("", "namespace", "create", "team-r")
	testutil.Eventually(t, 30*time.Second, func() bool {
		var ns struct{ Status string }
		r := u.must("", "namespace", "get", "team-r", "--output", "json")
		return json.Unmarshal([]byte(r.Stdout), &ns) == nil && ns.Status == "ready"
	}, "Namespace team-r to be ready")

	r := u.must("", "namespace", "reconcile", "team-r", "--wait", "--interval", "200ms", "--timeout", "1m", "--output", "json")
	var one struct {
		Items []struct{ ID, Status string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &one); err != nil || len(one.Items) != 1 || one.Items[0].Status != "succeeded" ||
		!strings.HasPrefix(one.Items[0].ID, "wrk_") {
		t.Errorf("reconcile team-r --wait: %s; want one succeeded reconciliation (%v)", r, err)
	}
	r = u.must("", "namespace", "reconcile", "--all", "--wait", "--interval", "200ms", "--timeout", "1m")
	if !strings.Contains(r.Stdout, "succeeded") {
		t.Errorf("reconcile --all --wait: %s", r)
	}
	for _, args := range [][]string{{"namespace", "reconcile"}, {"namespace", "reconcile", "team-r", "--all"}} {
		if r := u.run("", args...); r.Code != 2 {
			t.Errorf("%v: %s; want exit 2", args, r)
		}
	}
	if r := u.run("", "namespace", "reconcile", "nope"); r.Code != 3 {
		t.Errorf("reconcile of an unknown Namespace: %s; want exit 3", r)
	}
	a := u.must("", "audit", "list", "--action", "openclaw.namespaces.reconcile", "--output", "json")
	if strings.Count(a.Stdout, `"openclaw.namespaces.reconcile"`) != 2 {
		t.Errorf("audit list: %s; want two reconcile events", a)
	}
}
