package kube

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/compute"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// TestImagePullSecrets drives runtime.imagePullSecrets through
// PrepareRevision on the real API server: the sources live in a namespace
// of their own (the chart's release namespace), and each prepare copies
// them into the tenant namespace and has the gateway Deployment list the
// copies. A rotated source (new data, or recreated with the other registry
// format) reaches the next prepare; a missing source, a Secret that is not
// a registry credential and a foreign Secret of the copy's name each fail
// the prepare with an error naming them, before any object of the
// revision is applied, and no error carries a byte of a Secret. Dropping
// the list drops the field from the Deployment; DeleteAgent leaves the
// copies (they are the namespace's), DeleteNamespace takes them.
func TestImagePullSecrets(t *testing.T) {
	env := kubeenv.Env(t)
	ctx := testCtx(t, 3*time.Minute)
	sources := env.NewNamespace(t)
	cfg := baseConfig(env.NewNamespace(t), "occt-unused")
	cfg.Runtime.ImagePullSecrets = []string{"regcred", "legacy"}
	cfg.Runtime.ImagePullSecretsNamespace = sources
	d := newDriver(t, env, cfg)
	f := newFixture()
	tenant := TenantNamespace(f.ns.ID)
	t.Cleanup(func() {
		if err := d.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
			t.Errorf("cleanup: DeleteNamespace: %v", err)
		}
	})
	if err := d.EnsureNamespace(ctx, f.ns); err != nil {
		t.Fatalf("EnsureNamespace: %v", err)
	}

	// Every byte of every Secret here holds marker, so a leak into an error
	// shows.
	marker := kubeenv.RandomName("occ-pull-credential")
	dockerConfigJSON := func(user string) map[string][]byte {
		return map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths":{"registry.example":{"username":%q,"password":%q}}}`, user, marker)}
	}
	dockercfg := func(user string) map[string][]byte {
		return map[string][]byte{corev1.DockerConfigKey: fmt.Appendf(nil, `{"registry.example":{"username":%q,"password":%q}}`, user, marker)}
	}
	put := func(name string, typ corev1.SecretType, data map[string][]byte) {
		t.Helper()
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sources},
			Type:       typ,
			Data:       data,
		}
		var cur corev1.Secret
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), &cur)
		switch {
		case err == nil && cur.Type == typ:
			cur.Data = data
			err = env.Client.Update(ctx, &cur)
		case err == nil:
			// A Secret's type is immutable: the operator recreates it.
			if err = env.Client.Delete(ctx, &cur); err == nil {
				err = env.Client.Create(ctx, s)
			}
		default:
			err = env.Client.Create(ctx, s)
		}
		if err != nil {
			t.Fatalf("write source Secret %s/%s: %v", sources, name, err)
		}
	}
	// copies reads every copy in the tenant namespace, by name.
	copies := func() map[string]corev1.Secret {
		t.Helper()
		var list corev1.SecretList
		if err := env.Client.List(ctx, &list, client.InNamespace(tenant), client.MatchingLabels{LabelImagePullSecret: "true"}); err != nil {
			t.Fatal(err)
		}
		out := map[string]corev1.Secret{}
		for _, s := range list.Items {
			out[s.Name] = s
		}
		return out
	}
	deploymentRefs := func() []corev1.LocalObjectReference {
		t.Helper()
		var dep appsv1.Deployment
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: GatewayName(f.agent.ID)}, &dep); err != nil {
			t.Fatal(err)
		}
		return dep.Spec.Template.Spec.ImagePullSecrets
	}
	// checkCopies compares the copies with their sources: same type and
	// data, the driver's labels and source annotation, applied by occ.
	checkCopies := func(t *testing.T, names ...string) {
		t.Helper()
		got := copies()
		for _, name := range names {
			var src corev1.Secret
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: sources, Name: name}, &src); err != nil {
				t.Fatal(err)
			}
			cp, ok := got[ImagePullSecretName(name)]
			if !ok {
				t.Errorf("no copy %s of %s/%s in %s", ImagePullSecretName(name), sources, name, tenant)
				continue
			}
			if cp.Type != src.Type {
				t.Errorf("copy %s has type %q, its source %q", cp.Name, cp.Type, src.Type)
			}
			if diff := cmp.Diff(src.Data, cp.Data); diff != "" {
				t.Errorf("copy %s data differs from its source's (-source +copy):\n%s", cp.Name, diff)
			}
			wantLabels := map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: f.ns.ID, LabelImagePullSecret: "true"}
			if diff := cmp.Diff(wantLabels, cp.Labels); diff != "" {
				t.Errorf("copy %s labels (-want +got):\n%s", cp.Name, diff)
			}
			if got, want := cp.Annotations[AnnotationImagePullSecretSource], sources+"/"+name; got != want {
				t.Errorf("copy %s annotation %s = %q, want %q", cp.Name, AnnotationImagePullSecretSource, got, want)
			}
			if !slices.ContainsFunc(cp.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
				return e.Manager == FieldOwner && e.Operation == metav1.ManagedFieldsOperationApply
			}) {
				t.Errorf("copy %s: no server-side-apply field manager %q in %v", cp.Name, FieldOwner, cp.ManagedFields)
			}
		}
	}
	// prepareFails prepares rev with drv, wants the error want (retryable),
	// and checks that nothing of rev was applied: the prepare failed
	// before its ConfigMap.
	prepareFails := func(t *testing.T, drv *Driver, rev compute.Revision, want string) {
		t.Helper()
		_, err := drv.PrepareRevision(ctx, rev, compute.RevisionContext{})
		if err == nil {
			t.Fatalf("PrepareRevision(#%d) succeeded, want the error %q", rev.Number, want)
		}
		if _, permanent := compute.AsPermanent(err); permanent {
			t.Errorf("PrepareRevision(#%d) failed permanently: %v; the operator's fix must let it proceed", rev.Number, err)
		}
		if err.Error() != want {
			t.Errorf("PrepareRevision(#%d) error:\n got %s\nwant %s", rev.Number, err, want)
		}
		if strings.Contains(err.Error(), marker) {
			t.Errorf("PrepareRevision(#%d)'s error holds a Secret's data: %v", rev.Number, err)
		}
		if m, err := drv.getMeta(ctx, gvkConfigMap, tenant, ConfigMapName(f.agent.ID, rev.ID)); err != nil || m != nil {
			t.Errorf("after the failed PrepareRevision(#%d) its ConfigMap exists (%t, %v); nothing of it may be applied", rev.Number, m != nil, err)
		}
	}
	wantRefs := []corev1.LocalObjectReference{{Name: "image-pull-regcred"}, {Name: "image-pull-legacy"}}

	put("regcred", corev1.SecretTypeDockerConfigJson, dockerConfigJSON("first"))
	put("legacy", corev1.SecretTypeDockercfg, dockercfg("first"))
	n := int64(0)
	next := func() compute.Revision { n++; return f.revision(n, `{}`) }

	t.Run("a deploy copies the Secrets and the Deployment lists them", func(t *testing.T) {
		if _, err := d.PrepareRevision(ctx, next(), compute.RevisionContext{}); err != nil {
			t.Fatalf("PrepareRevision: %v", err)
		}
		checkCopies(t, "regcred", "legacy")
		if diff := cmp.Diff(wantRefs, deploymentRefs()); diff != "" {
			t.Errorf("Deployment imagePullSecrets (-want +got):\n%s", diff)
		}
	})

	t.Run("a rotated source reaches the next deploy", func(t *testing.T) {
		before := copies()
		put("regcred", corev1.SecretTypeDockerConfigJson, dockerConfigJSON("rotated"))
		// Recreated in the other registry format: the copy's type, which
		// cannot change in place, follows.
		put("legacy", corev1.SecretTypeDockerConfigJson, dockerConfigJSON("reformatted"))
		if _, err := d.PrepareRevision(ctx, next(), compute.RevisionContext{}); err != nil {
			t.Fatalf("PrepareRevision: %v", err)
		}
		checkCopies(t, "regcred", "legacy")
		after := copies()
		for _, name := range []string{"image-pull-regcred", "image-pull-legacy"} {
			if string(before[name].Data[corev1.DockerConfigJsonKey])+string(before[name].Data[corev1.DockerConfigKey]) ==
				string(after[name].Data[corev1.DockerConfigJsonKey])+string(after[name].Data[corev1.DockerConfigKey]) {
				t.Errorf("copy %s did not change with its source", name)
			}
		}
		if got := after["image-pull-legacy"].Type; got != corev1.SecretTypeDockerConfigJson {
			t.Errorf("copy image-pull-legacy has type %q after its source was recreated as %s", got, corev1.SecretTypeDockerConfigJson)
		}
		// And preparing again with nothing rotated changes no copy.
		if _, err := d.PrepareRevision(ctx, next(), compute.RevisionContext{}); err != nil {
			t.Fatalf("PrepareRevision: %v", err)
		}
		for name, cp := range copies() {
			if cp.ResourceVersion != after[name].ResourceVersion {
				t.Errorf("copy %s changed (resourceVersion %s → %s) though its source did not", name, after[name].ResourceVersion, cp.ResourceVersion)
			}
		}
	})

	t.Run("a missing source fails the deploy", func(t *testing.T) {
		missing := cfg
		missing.Runtime.ImagePullSecrets = []string{"regcred", "absent"}
		prepareFails(t, newDriver(t, env, missing), next(), fmt.Sprintf(
			"kube: image pull Secret %s/absent (runtime.imagePullSecrets) does not exist; no gateway is deployed without it: create it, or remove it from the list", sources))
	})

	t.Run("a Secret that is not a registry credential is refused", func(t *testing.T) {
		put("opaque", corev1.SecretTypeOpaque, map[string][]byte{"password": []byte(marker)})
		opaque := cfg
		opaque.Runtime.ImagePullSecrets = []string{"opaque"}
		prepareFails(t, newDriver(t, env, opaque), next(), fmt.Sprintf(
			`kube: image pull Secret %s/opaque (runtime.imagePullSecrets) is of type "Opaque"; only kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg Secrets are copied to tenant namespaces`, sources))
		if _, ok := copies()[ImagePullSecretName("opaque")]; ok {
			t.Errorf("the Opaque Secret was copied into %s", tenant)
		}
	})

	t.Run("a foreign Secret of the copy's name is left alone", func(t *testing.T) {
		put("foreign", corev1.SecretTypeDockerConfigJson, dockerConfigJSON("foreign"))
		theirs := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: ImagePullSecretName("foreign"), Namespace: tenant},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"x": []byte(marker)},
		}
		if err := env.Client.Create(ctx, theirs); err != nil {
			t.Fatal(err)
		}
		foreign := cfg
		foreign.Runtime.ImagePullSecrets = []string{"foreign"}
		prepareFails(t, newDriver(t, env, foreign), next(), fmt.Sprintf(
			"kube: Secret %s/image-pull-foreign exists but is not labelled as OCC's copy of image pull Secret %s/foreign (labels %s, %s, %s); leaving it alone",
			tenant, sources, LabelManagedBy, LabelNamespace, LabelImagePullSecret))
		var after corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), &after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != theirs.ResourceVersion {
			t.Errorf("the foreign Secret changed (resourceVersion %s → %s)", theirs.ResourceVersion, after.ResourceVersion)
		}
	})

	t.Run("without the list the Deployment lists none and the copies stay", func(t *testing.T) {
		none := cfg
		none.Runtime.ImagePullSecrets, none.Runtime.ImagePullSecretsNamespace = nil, ""
		if _, err := newDriver(t, env, none).PrepareRevision(ctx, next(), compute.RevisionContext{}); err != nil {
			t.Fatalf("PrepareRevision: %v", err)
		}
		if refs := deploymentRefs(); len(refs) != 0 {
			t.Errorf("Deployment imagePullSecrets %v without runtime.imagePullSecrets, want none", refs)
		}
		// Other Agents' Deployments may still list them.
		checkCopies(t, "regcred", "legacy")
	})

	t.Run("DeleteAgent leaves the namespace's copies", func(t *testing.T) {
		if err := d.DeleteAgent(ctx, f.agent); err != nil {
			t.Fatalf("DeleteAgent: %v", err)
		}
		checkCopies(t, "regcred", "legacy")
	})

	t.Run("DeleteNamespace takes them", func(t *testing.T) {
		if err := d.DeleteNamespace(ctx, f.ns); err != nil {
			t.Fatalf("DeleteNamespace: %v", err)
		}
		kubeenv.WaitFor(t, ctx, func() (bool, error) {
			m, err := d.getMeta(ctx, gvkNamespace, "", tenant)
			return m == nil, err
		})
	})
}
