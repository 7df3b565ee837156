package kube

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/openclaw/occ/internal/compute"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// hidingClient answers the first Get of one object NotFound, as if the
// object appeared only after the driver's read: the race between a read
// that finds nothing and the write that creates.
type hidingClient struct {
	client.Client
	kind string
	key  client.ObjectKey
	hid  atomic.Bool
}

func (c *hidingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key == c.key && c.kindOf(obj) == c.kind && c.hid.CompareAndSwap(false, true) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: c.kind}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *hidingClient) kindOf(obj client.Object) string {
	if k := obj.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return ""
	}
	return gvk.Kind
}

// occManagers lists the managed-fields entries of the field manager occ
// on the object itself (not a subresource), as "operation".
func occManagers(o metav1.Object) []string {
	var out []string
	for _, e := range o.GetManagedFields() {
		if e.Manager == FieldOwner && e.Subresource == "" {
			out = append(out, string(e.Operation))
		}
	}
	return out
}

// TestAbsentObjectsAreCreatedNotAdopted: when the driver's read finds no
// object of a derived name and someone else creates one before the
// driver's write, the write must fail and leave that object as it is
// (docs/compute-kubernetes.md: objects not labelled as the Agent's are
// never touched). A forced server-side apply would take it over, so an
// absent object is created with a plain create; the created objects are
// still OCC's by apply, so a later apply removes the fields it leaves out.
func TestAbsentObjectsAreCreatedNotAdopted(t *testing.T) {
	env := kubeenv.Env(t)
	ctx := testCtx(t, 3*time.Minute)
	sources := env.NewNamespace(t)
	cfg := baseConfig(env.NewNamespace(t), "occt-unused")
	cfg.Runtime.ImagePullSecrets = []string{"regcred"}
	cfg.Runtime.ImagePullSecretsNamespace = sources
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: sources},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"auth":"dTpw"}}}`)},
	}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, env, cfg)

	const (
		ensure   = "EnsureNamespace"
		prepare  = "PrepareRevision"
		activate = "ActivateRevision" // after a PrepareRevision without the race
	)
	run := func(d *Driver, verb string, f fixture, rev compute.Revision, rc compute.RevisionContext) error {
		switch verb {
		case ensure:
			return d.EnsureNamespace(ctx, f.ns)
		case prepare:
			_, err := d.PrepareRevision(ctx, rev, rc)
			return err
		default:
			return d.ActivateRevision(ctx, rev, rc)
		}
	}
	for _, tc := range []struct {
		name string
		// verb is the call whose read is raced.
		verb  string
		setup bool
		// object is the driver's rendering of the object someone else
		// creates first.
		object func(f fixture, objs *Objects) client.Object
	}{
		{"tenant namespace", ensure, false, func(f fixture, _ *Objects) client.Object {
			ns, _ := RenderNamespace(cfg, f.ns)
			return ns
		}},
		{"image pull Secret copy", prepare, false, func(f fixture, _ *Objects) client.Object {
			return must(RenderImagePullSecret(f.ns.ID, src))
		}},
		{"revision ConfigMap", prepare, false, func(_ fixture, objs *Objects) client.Object { return objs.ConfigMap }},
		{"state PVC", prepare, false, func(_ fixture, objs *Objects) client.Object { return objs.StatePVC }},
		{"setup Secret", prepare, true, func(_ fixture, objs *Objects) client.Object { return objs.SetupSecret }},
		{"gateway Deployment", prepare, false, func(_ fixture, objs *Objects) client.Object { return objs.Deployment }},
		{"Service", activate, false, func(_ fixture, objs *Objects) client.Object { return objs.Service }},
		{"HTTPRoute", activate, false, func(_ fixture, objs *Objects) client.Object { return objs.HTTPRoute }},
		{"setup Secret at activation", activate, true, func(_ fixture, objs *Objects) client.Object { return objs.SetupSecret }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			t.Cleanup(func() {
				if err := d.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
					t.Logf("cleanup: DeleteNamespace: %v", err)
				}
			})
			rev := f.revision(1, `{}`)
			rc := compute.RevisionContext{}
			if tc.setup {
				rc.WorkspaceSetup = f.pendingSetup()
			}
			objs, err := Render(cfg, rev, rc.WorkspaceSetup)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			want := tc.object(f, objs)
			if tc.verb != ensure {
				if err := d.EnsureNamespace(ctx, f.ns); err != nil {
					t.Fatalf("EnsureNamespace: %v", err)
				}
			}
			if tc.verb == activate {
				if err := run(d, prepare, f, rev, rc); err != nil {
					t.Fatalf("PrepareRevision: %v", err)
				}
				// The prepare made OCC's setup Secret; someone else's
				// takes its place.
				if err := env.Client.Delete(ctx, want.DeepCopyObject().(client.Object)); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			}

			// Someone else's object of the derived name: the driver's
			// rendering without OCC's labels and annotations.
			foreign := want.DeepCopyObject().(client.Object)
			foreign.SetLabels(map[string]string{"example.com/owner": "someone-else"})
			foreign.SetAnnotations(nil)
			if dep, ok := foreign.(*appsv1.Deployment); ok {
				dep.Spec.Replicas = ptr.To(int32(0))
			}
			if err := env.Client.Create(ctx, foreign); err != nil {
				t.Fatalf("create the foreign %T: %v", foreign, err)
			}
			// As created (the server adds kubernetes.io/metadata.name to a
			// namespace).
			foreignLabels := foreign.GetLabels()
			if _, ok := foreign.(*corev1.Namespace); ok {
				t.Cleanup(func() { deleteCluster(t, env, foreign) })
			}

			kind := want.GetObjectKind().GroupVersionKind().Kind
			hc := &hidingClient{Client: env.Client, kind: kind, key: client.ObjectKeyFromObject(want)}
			racing, err := New(cfg, hc, Options{CallTimeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			err = run(racing, tc.verb, f, rev, rc)
			if !hc.hid.Load() {
				t.Fatalf("the driver never read %s %s", kind, hc.key)
			}
			if err == nil {
				t.Errorf("the verb succeeded over someone else's %s %s created after its read; want an error", kind, hc.key)
			} else {
				t.Logf("refused: %v", err)
			}
			got := want.DeepCopyObject().(client.Object)
			if err := env.Client.Get(ctx, hc.key, got); err != nil {
				t.Fatalf("re-read the foreign %s: %v", kind, err)
			}
			if diff := cmp.Diff(foreignLabels, got.GetLabels()); diff != "" {
				t.Errorf("the foreign %s's labels changed (-want +got):\n%s", kind, diff)
			}
			for k := range got.GetAnnotations() {
				// Controllers annotate (deployment.kubernetes.io/revision);
				// OCC's annotations are openclaw.dev/.
				if strings.HasPrefix(k, "openclaw.dev/") {
					t.Errorf("the foreign %s got OCC's annotation %s", kind, k)
				}
			}
			if m := occManagers(got); len(m) != 0 {
				t.Errorf("the foreign %s has fields of the field manager %s (%v)", kind, FieldOwner, m)
			}
		})
	}

	// Without a race every object is created, and owned by occ's apply
	// entry only: a create's update entry would keep fields a later apply
	// leaves out.
	t.Run("created objects are OCC's by apply", func(t *testing.T) {
		f := newFixture()
		t.Cleanup(func() {
			if err := d.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
				t.Logf("cleanup: DeleteNamespace: %v", err)
			}
		})
		if err := d.EnsureNamespace(ctx, f.ns); err != nil {
			t.Fatalf("EnsureNamespace: %v", err)
		}
		rev := f.revision(1, `{}`)
		rc := compute.RevisionContext{WorkspaceSetup: f.pendingSetup()}
		if err := run(d, prepare, f, rev, rc); err != nil {
			t.Fatalf("PrepareRevision: %v", err)
		}
		if err := run(d, activate, f, rev, rc); err != nil {
			t.Fatalf("ActivateRevision: %v", err)
		}
		objs := must(Render(cfg, rev, rc.WorkspaceSetup))
		for _, o := range []client.Object{must(RenderImagePullSecret(f.ns.ID, src)), objs.ConfigMap, objs.StatePVC, objs.SetupSecret, objs.Deployment, objs.Service, objs.HTTPRoute} {
			kind := o.GetObjectKind().GroupVersionKind()
			m, err := d.getMeta(ctx, kind, o.GetNamespace(), o.GetName())
			if err != nil || m == nil {
				t.Fatalf("read %s %s: %v", kind.Kind, o.GetName(), err)
			}
			if diff := cmp.Diff([]string{string(metav1.ManagedFieldsOperationApply)}, occManagers(m)); diff != "" {
				t.Errorf("%s %s: entries of the field manager %s (-want +got):\n%s", kind.Kind, o.GetName(), FieldOwner, diff)
			}
		}
	})
}
