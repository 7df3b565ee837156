package routingops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/kube"
)

// API is what the routing commands call on the OCC API (*client.Client).
type API interface {
	ListAgents(ctx context.Context, ns string) ([]apitypes.Agent, error)
	ListRevisions(ctx context.Context, ns, agentID string) ([]apitypes.Revision, error)
	GetConfiguration(ctx context.Context, ns, cfgID string) (apitypes.Configuration, error)
	ReconcileNamespace(ctx context.Context, ns string) (apitypes.Reconciliation, error)
	WaitForReconciliation(ctx context.Context, ns, id string, interval time.Duration) (apitypes.Reconciliation, error)
	DeployAgent(ctx context.Context, ns, agentID string) (apitypes.Revision, error)
	WaitForDeployment(ctx context.Context, ns, agentID, deploymentID string, interval time.Duration, progress func(apitypes.Deployment)) (apitypes.Deployment, error)
	GetFile(ctx context.Context, ns, agentID, name string) (client.File, error)
}

var _ API = (*client.Client)(nil)

// Cluster is what the routing commands read from Kubernetes with the
// operator's kubeconfig (*kube.Driver).
type Cluster interface {
	Config() kube.Config
	PlanNamespace(ctx context.Context, ns compute.Namespace) (compute.NamespacePlan, error)
	BackupNamespace(ctx context.Context, namespaceID string) (kube.NamespaceBackup, error)
	CheckInstallationRouting(ctx context.Context) []kube.Check
	CheckAgentRouting(ctx context.Context, namespaceID, agentID string) []kube.Check
}

var _ Cluster = (*kube.Driver)(nil)

// EnableOptions configures Enable.
type EnableOptions struct {
	API     API
	Cluster Cluster
	// Namespaces are the Namespaces to enable routing for (ready ones;
	// the caller resolves names and --all).
	Namespaces []apitypes.Namespace
	// BackupDir holds the backups and the progress (see state.go).
	BackupDir string
	// DryRun prints the plan and changes nothing, not even the backup
	// directory.
	DryRun bool
	// Out receives the plan and the result; Log one line per step.
	Out, Log io.Writer
	// Interval is how often waits poll; Timeout bounds each wait
	// (a reconciliation, a deployment, an Agent's route).
	Interval, Timeout time.Duration
}

// RefusalError is a refusal of the driver's checks (the tenant namespace
// is not OCC's, the gateway selector changed, another policy admits
// other callers): nothing was changed.
type RefusalError struct {
	Namespace string
	Code      string
	Message   string
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("Namespace %s: %s: %s", e.Namespace, e.Code, e.Message)
}

// nsWork is one Namespace's plan.
type nsWork struct {
	ns     apitypes.Namespace
	plan   compute.NamespacePlan
	agents []apitypes.Agent
}

// Enable turns routing on for existing Namespaces and Agents: it plans
// every Namespace first (a refusal stops it before anything changed),
// then for each: backs up the namespace, its policies and each Agent's
// configuration and active revision, reconciles the Namespace through the
// API and waits, redeploys each running Agent (a new revision of the same
// Agent) and follows each deployment, and finally waits for each Agent's
// route checks. Progress is saved after every step, so a second run
// resumes without redoing finished Agents.
func Enable(ctx context.Context, o EnableOptions) error {
	if o.Cluster.Config().GatewayRouting == nil {
		return errors.New("the driver configuration has no gatewayRouting: configure routing (chart values and the driver configuration) and restart the API and worker first")
	}
	o.Interval = max(o.Interval, 100*time.Millisecond)
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	var work []nsWork
	for _, ns := range o.Namespaces {
		plan, err := o.Cluster.PlanNamespace(ctx, compute.Namespace{ID: ns.ID, Name: ns.Name})
		if p, ok := compute.AsPermanent(err); ok {
			msg := p.Public
			if msg == "" {
				msg = p.Error()
			}
			return &RefusalError{Namespace: ns.Name + " (" + ns.ID + ")", Code: p.Code, Message: msg}
		}
		if err != nil {
			return fmt.Errorf("plan Namespace %s: %w", ns.Name, err)
		}
		agents, err := o.API.ListAgents(ctx, ns.ID)
		if err != nil {
			return err
		}
		work = append(work, nsWork{ns: ns, plan: plan, agents: agents})
	}
	if o.DryRun {
		return printPlan(o.Out, o.BackupDir, work)
	}

	dir, err := openBackupDir(o.BackupDir)
	if err != nil {
		return err
	}
	prog, err := dir.loadProgress()
	if err != nil {
		return err
	}
	save := func() error { return dir.saveProgress(prog) }
	for _, w := range work {
		if err := enableNamespace(ctx, o, dir, prog, save, w); err != nil {
			return err
		}
	}
	return nil
}

func enableNamespace(ctx context.Context, o EnableOptions, dir *backupDir, prog *progress, save func() error, w nsWork) error {
	ns := w.ns
	np := prog.ns(ns.ID)
	logf := func(format string, a ...any) { fmt.Fprintf(o.Log, "%s: "+format+"\n", append([]any{ns.Name}, a...)...) }

	// 1. Backups, written once: a resumed run keeps the first run's.
	if !np.BackedUp {
		b, err := o.Cluster.BackupNamespace(ctx, ns.ID)
		if err != nil {
			return fmt.Errorf("back up Namespace %s: %w", ns.Name, err)
		}
		if err := dir.write(filepath.Join(ns.ID, "namespace.json"), b, false); err != nil {
			return err
		}
		if err := dir.write(filepath.Join(ns.ID, "plan.json"), planFile(w.plan), false); err != nil {
			return err
		}
	}
	for _, a := range w.agents {
		ap := np.agent(a.ID)
		if ap.BackedUp {
			continue
		}
		bk, err := agentBackup(ctx, o.API, a)
		if err != nil {
			return err
		}
		if err := dir.write(filepath.Join(ns.ID, "agents", a.ID+".json"), bk, false); err != nil {
			return err
		}
		ap.BackedUp, ap.FromRevision = true, a.ActiveRevisionID
	}
	if !np.BackedUp {
		np.BackedUp = true
		logf("backed up the namespace, its NetworkPolicies and %d Agents to %s", len(w.agents), filepath.Join(dir.path, ns.ID))
	}
	if err := save(); err != nil {
		return err
	}

	// 2. The Namespace reconciliation, through the API and the worker.
	if !np.Reconciled {
		if np.Reconciliation == "" {
			r, err := o.API.ReconcileNamespace(ctx, ns.ID)
			if err != nil {
				return fmt.Errorf("reconcile Namespace %s: %w", ns.Name, err)
			}
			np.Reconciliation = r.ID
			if err := save(); err != nil {
				return err
			}
			logf("reconciliation %s queued", r.ID)
		} else {
			logf("following reconciliation %s of the earlier run", np.Reconciliation)
		}
		wctx, cancel := context.WithTimeout(ctx, o.Timeout)
		r, err := o.API.WaitForReconciliation(wctx, ns.ID, np.Reconciliation, o.Interval)
		cancel()
		if err != nil {
			return fmt.Errorf("reconciliation %s of %s: %w", np.Reconciliation, ns.Name, err)
		}
		if r.Status == apitypes.DeploymentFailed {
			// A failed reconciliation is not retried by a resumed run
			// blindly: the next run queues a new one after the operator
			// has fixed what it names.
			np.Reconciliation = ""
			if err := save(); err != nil {
				return err
			}
			code, msg := "", "failed"
			if r.Error != nil {
				code, msg = r.Error.Code, r.Error.Message
			}
			return &RefusalError{Namespace: ns.Name + " (" + ns.ID + ")", Code: code, Message: msg}
		}
		np.Reconciled = true
		if err := save(); err != nil {
			return err
		}
		logf("reconciled: %s", changedSummary(w.plan))
	}

	// 3. Each running Agent: a new revision of the same Agent.
	for _, a := range w.agents {
		ap := np.agent(a.ID)
		if ap.Done {
			logf("Agent %s (%s) already redeployed (deployment %s); not redone", a.Name, a.ID, ap.Deployment)
			continue
		}
		if ap.Skipped != "" {
			continue
		}
		if a.ActiveRevisionID == "" || a.DesiredRuntimeState != apitypes.RuntimeRunning || a.Status != apitypes.AgentActive {
			ap.Skipped = "not running; its next deployment gets its route"
			if err := save(); err != nil {
				return err
			}
			logf("Agent %s (%s) skipped: %s", a.Name, a.ID, ap.Skipped)
			continue
		}
		if err := redeploy(ctx, o, save, ns, a, ap, logf); err != nil {
			return err
		}
	}

	// 4. The Agents' routes, as doctor checks them.
	for _, a := range w.agents {
		if np.agent(a.ID).Skipped != "" {
			continue
		}
		if err := waitRoute(ctx, o, ns.ID, a); err != nil {
			return err
		}
		logf("Agent %s (%s): HTTPRoute accepted, namespace label and ingress policy in place", a.Name, a.ID)
	}
	return nil
}

func redeploy(ctx context.Context, o EnableOptions, save func() error, ns apitypes.Namespace, a apitypes.Agent, ap *agentProgress, logf func(string, ...any)) error {
	if ap.Deployment == "" && ap.Requested {
		// Interrupted around DeployAgent: adopt a revision made since.
		revs, err := o.API.ListRevisions(ctx, ns.ID, a.ID)
		if err != nil {
			return err
		}
		if newest := newestRevision(revs); len(revs) > ap.RevisionsSeen && newest != nil && newest.ID != ap.LastRevisionID {
			ap.Deployment = newest.ID
			logf("Agent %s (%s): adopting deployment %s requested by the earlier run", a.Name, a.ID, newest.ID)
		}
	}
	if ap.Deployment == "" {
		revs, err := o.API.ListRevisions(ctx, ns.ID, a.ID)
		if err != nil {
			return err
		}
		ap.Requested, ap.RevisionsSeen = true, len(revs)
		if n := newestRevision(revs); n != nil {
			ap.LastRevisionID = n.ID
		}
		if err := save(); err != nil {
			return err
		}
		rev, err := o.API.DeployAgent(ctx, ns.ID, a.ID)
		if err != nil {
			return fmt.Errorf("redeploy Agent %s: %w", a.Name, err)
		}
		ap.Deployment = rev.ID
		if err := save(); err != nil {
			return err
		}
		logf("Agent %s (%s): deployment %s (revision %d) requested", a.Name, a.ID, rev.ID, rev.Number)
	} else {
		logf("Agent %s (%s): following deployment %s of the earlier run", a.Name, a.ID, ap.Deployment)
	}
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	seen := map[apitypes.DeploymentStatus]bool{}
	d, err := o.API.WaitForDeployment(wctx, ns.ID, a.ID, ap.Deployment, o.Interval, func(d apitypes.Deployment) {
		// A deployment goes back to queued while the worker waits for
		// its gateway; each state is reported once.
		if !seen[d.Status] {
			seen[d.Status] = true
			logf("Agent %s (%s): deployment %s %s", a.Name, a.ID, d.ID, d.Status)
		}
	})
	if err != nil {
		return fmt.Errorf("deployment %s of Agent %s (run again to keep following it): %w", ap.Deployment, a.Name, err)
	}
	if d.Status != apitypes.DeploymentSucceeded {
		msg := string(d.Status)
		if d.Error != nil {
			msg = d.Error.Code + ": " + d.Error.Message
		}
		// The next run deploys again (the failed revision stays in the
		// Agent's history; its previous revision keeps serving).
		ap.Requested, ap.Deployment = false, ""
		if err := save(); err != nil {
			return err
		}
		return fmt.Errorf("deployment %s of Agent %s failed: %s; fix it and run again", d.ID, a.Name, msg)
	}
	ap.Done = true
	return save()
}

func newestRevision(revs []apitypes.Revision) *apitypes.Revision {
	var n *apitypes.Revision
	for i := range revs {
		if n == nil || revs[i].Number > n.Number {
			n = &revs[i]
		}
	}
	return n
}

// waitRoute waits (bounded by Timeout) until the Agent's route checks
// pass; Envoy Gateway sets the route's status shortly after the worker
// applies it.
func waitRoute(ctx context.Context, o EnableOptions, nsID string, a apitypes.Agent) error {
	deadline := time.Now().Add(o.Timeout)
	for {
		checks := o.Cluster.CheckAgentRouting(ctx, nsID, a.ID)
		var failed []string
		for _, c := range checks {
			if c.Result == kube.CheckFailed {
				failed = append(failed, c.Object+": "+c.Detail+" ("+c.Remedy+")")
			}
		}
		if len(failed) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the routing checks of Agent %s still fail after %s:\n  %s", a.Name, o.Timeout, strings.Join(failed, "\n  "))
		}
		t := time.NewTimer(o.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// agentFile is an Agent's backup.
type agentFile struct {
	Agent          apitypes.Agent         `json:"agent"`
	ActiveRevision *apitypes.Revision     `json:"activeRevision"`
	Configuration  apitypes.Configuration `json:"configuration"`
	Revisions      []revisionSummary      `json:"revisions"`
}

type revisionSummary struct {
	ID     string `json:"id"`
	Number int64  `json:"revision"`
}

func agentBackup(ctx context.Context, api API, a apitypes.Agent) (agentFile, error) {
	out := agentFile{Agent: a, Revisions: []revisionSummary{}}
	revs, err := api.ListRevisions(ctx, a.NamespaceID, a.ID)
	if err != nil {
		return agentFile{}, fmt.Errorf("back up Agent %s: %w", a.Name, err)
	}
	for i := range revs {
		out.Revisions = append(out.Revisions, revisionSummary{ID: revs[i].ID, Number: revs[i].Number})
		if revs[i].ID == a.ActiveRevisionID {
			out.ActiveRevision = &revs[i]
		}
	}
	if out.Configuration, err = api.GetConfiguration(ctx, a.NamespaceID, a.ConfigurationID); err != nil {
		return agentFile{}, fmt.Errorf("back up the Configuration of Agent %s: %w", a.Name, err)
	}
	return out, nil
}

// planEntry is one object of a plan, as saved and printed.
type planEntry struct {
	Action          string          `json:"action"`
	Kind            string          `json:"kind"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name"`
	ResourceVersion string          `json:"resourceVersion,omitempty"`
	Fields          []string        `json:"fields,omitempty"`
	Desired         json.RawMessage `json:"desired,omitempty"`
}

func planFile(p compute.NamespacePlan) []planEntry {
	out := []planEntry{}
	for _, c := range p.Changes {
		e := planEntry{Action: c.Action, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, ResourceVersion: c.ResourceVersion, Fields: c.Fields}
		if c.Action != compute.ActionUnchanged {
			e.Desired = c.Desired
		}
		out = append(out, e)
	}
	return out
}

func changedSummary(p compute.NamespacePlan) string {
	var parts []string
	for _, c := range p.Changes {
		if c.Action != compute.ActionUnchanged {
			parts = append(parts, c.Action+" "+c.Kind+" "+c.Name)
		}
	}
	if len(parts) == 0 {
		return "nothing needed changing"
	}
	return strings.Join(parts, ", ")
}

// printPlan is --dry-run's output: per Namespace the backup it would
// write, each object with its action and, for a change, the fields and
// the object it would apply, then the Agents it would redeploy.
func printPlan(w io.Writer, backupDir string, work []nsWork) error {
	var b strings.Builder
	for _, x := range work {
		fmt.Fprintf(&b, "Namespace %s (%s), Kubernetes namespace %s\n", x.ns.Name, x.ns.ID, kube.TenantNamespace(x.ns.ID))
		fmt.Fprintf(&b, "  back up to %s: namespace.json (the namespace and its NetworkPolicies), plan.json, agents/<id>.json\n", filepath.Join(backupDir, x.ns.ID))
		for _, c := range x.plan.Changes {
			fmt.Fprintf(&b, "  %-9s %s %s", c.Action, c.Kind, objectName(c))
			if c.ResourceVersion != "" {
				fmt.Fprintf(&b, " (at resourceVersion %s)", c.ResourceVersion)
			}
			b.WriteString("\n")
			if c.Action == compute.ActionUnchanged {
				continue
			}
			for _, f := range c.Fields {
				fmt.Fprintf(&b, "            change %s\n", f)
			}
			var pretty any
			if json.Unmarshal(c.Desired, &pretty) == nil {
				d, _ := json.MarshalIndent(pretty, "            ", "  ")
				fmt.Fprintf(&b, "            apply %s\n", d)
			}
		}
		for _, a := range x.agents {
			if a.ActiveRevisionID == "" || a.DesiredRuntimeState != apitypes.RuntimeRunning || a.Status != apitypes.AgentActive {
				fmt.Fprintf(&b, "  skip      Agent %s (%s): not running\n", a.Name, a.ID)
				continue
			}
			fmt.Fprintf(&b, "  redeploy  Agent %s (%s): a new revision of the same Agent after %s (same id, same PVC %s)\n",
				a.Name, a.ID, a.ActiveRevisionID, kube.StatePVCName(a.ID))
		}
	}
	b.WriteString("Dry run: nothing was changed.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func objectName(c compute.ObjectChange) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}
