package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
)

// personaFiles are the workspace files an Agent can be created with and
// whose live copies `occ files` reads and writes.
var personaFiles = []string{"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"}

var agentCols = []column[apitypes.Agent]{
	{"ID", func(a apitypes.Agent) string { return a.ID }},
	{"NAME", func(a apitypes.Agent) string { return a.Name }},
	{"STATUS", func(a apitypes.Agent) string { return string(a.Status) }},
	{"DESIRED", func(a apitypes.Agent) string { return string(a.DesiredRuntimeState) }},
	{"CONFIGURATION", func(a apitypes.Agent) string { return a.ConfigurationID }},
	{"ACTIVE REVISION", func(a apitypes.Agent) string { return a.ActiveRevisionID }},
	{"CREATED", func(a apitypes.Agent) string { return timeCell(a.CreatedAt) }},
}

var revisionCols = []column[apitypes.Revision]{
	{"ID", func(r apitypes.Revision) string { return r.ID }},
	{"REVISION", func(r apitypes.Revision) string { return strconv.FormatInt(r.Number, 10) }},
	{"CONFIGURATION", func(r apitypes.Revision) string { return r.ConfigurationID }},
	{"GENERATION", func(r apitypes.Revision) string { return strconv.FormatInt(r.ConfigurationGeneration, 10) }},
	{"DRIVER", func(r apitypes.Revision) string { return r.ComputeDriverID }},
	{"CREATED", func(r apitypes.Revision) string { return timeCell(r.CreatedAt) }},
}

var deploymentCols = []column[apitypes.Deployment]{
	{"ID", func(d apitypes.Deployment) string { return d.ID }},
	{"REVISION", func(d apitypes.Deployment) string { return strconv.FormatInt(d.Revision, 10) }},
	{"STATUS", func(d apitypes.Deployment) string { return string(d.Status) }},
	{"ERROR", func(d apitypes.Deployment) string {
		if d.Error != nil {
			return d.Error.Code + ": " + d.Error.Message
		}
		return ""
	}},
	{"UPDATED", func(d apitypes.Deployment) string { return timeCell(d.UpdatedAt) }},
}

func newAgentCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "agent", "Create, deploy, stop and delete Agents",
		"  occ agent create helper --configuration base --files ./persona -n team-a\n"+
			"  occ agent deploy helper --wait\n  occ agent list")
	addClientFlags(cmd, f, true)
	pf := &pageFlags{}
	list := &cobra.Command{
		Use: "list", Short: "List the Agents of the Namespace you may read (every page, or one with --limit/--cursor)", Args: cobra.NoArgs,
		Example: "  occ agent list -n team-a\n  occ agent list -n team-a --limit 100",
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			ns, err := cn.namespaceID(cmd.Context())
			if err != nil {
				return err
			}
			return listCmd(cmd.Context(), d.stderr, cn.out, pf, agentCols,
				func(ctx context.Context) ([]apitypes.Agent, error) { return cn.c.ListAgents(ctx, ns) },
				func(ctx context.Context, q apitypes.ListQuery) ([]apitypes.Agent, string, error) {
					l, err := cn.c.ListAgentsPage(ctx, ns, q)
					return l.Items, l.NextCursor, err
				})
		}),
	}
	addPageFlags(list, pf)
	rpf := &pageFlags{}
	revisions := &cobra.Command{
		Use: "revisions AGENT", Short: "List an Agent's revisions by number, oldest first (every page, or one with --limit/--cursor)",
		Args: cobra.ExactArgs(1), Example: "  occ agent revisions helper\n  occ agent revisions helper --limit 20",
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			ns, id, err := cn.agentArg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return listCmd(cmd.Context(), d.stderr, cn.out, rpf, revisionCols,
				func(ctx context.Context) ([]apitypes.Revision, error) { return cn.c.ListRevisions(ctx, ns, id) },
				func(ctx context.Context, q apitypes.ListQuery) ([]apitypes.Revision, string, error) {
					l, err := cn.c.ListRevisionsPage(ctx, ns, id, q)
					return l.Items, l.NextCursor, err
				})
		}),
	}
	addPageFlags(revisions, rpf)
	cmd.AddCommand(
		list,
		agentOne(d, f, "get AGENT", "Show an Agent (name or id)", "  occ agent get helper --output json",
			func(ctx context.Context, cn *conn, ns, id string) (apitypes.Agent, error) {
				return cn.c.GetAgent(ctx, ns, id)
			}),
		newAgentCreateCmd(d, f),
		newAgentDeployCmd(d, f),
		agentOne(d, f, "stop AGENT", "Stop a running Agent (its gateway stops; files stay)", "  occ agent stop helper",
			func(ctx context.Context, cn *conn, ns, id string) (apitypes.Agent, error) {
				return cn.c.StopAgent(ctx, ns, id)
			}),
		agentOne(d, f, "delete AGENT", "Delete an Agent; the worker tears it down", "  occ agent delete helper",
			func(ctx context.Context, cn *conn, ns, id string) (apitypes.Agent, error) {
				return cn.c.DeleteAgent(ctx, ns, id)
			}),
		revisions,
		&cobra.Command{
			Use:   "deployments AGENT [DEPLOYMENT]",
			Short: "Show the deployment of each revision of an Agent (or of one)",
			Long: `Show the deployment of every revision of AGENT (a revision's id is its
deployment's id), or of the one DEPLOYMENT.`,
			Example: "  occ agent deployments helper\n  occ agent deployments helper rev_… --output yaml",
			Args:    cobra.RangeArgs(1, 2),
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				ctx := cmd.Context()
				ns, id, err := cn.agentArg(ctx, args[0])
				if err != nil {
					return err
				}
				if len(args) == 2 {
					dep, err := cn.c.GetDeployment(ctx, ns, id, args[1])
					if err != nil {
						return apiError(err)
					}
					return printOne(cn.out, dep, deploymentCols)
				}
				revs, err := cn.c.ListRevisions(ctx, ns, id)
				if err != nil {
					return apiError(err)
				}
				deps := make([]apitypes.Deployment, 0, len(revs))
				for _, r := range revs {
					dep, err := cn.c.GetDeployment(ctx, ns, id, r.ID)
					if err != nil {
						return apiError(err)
					}
					deps = append(deps, dep)
				}
				return printList(cn.out, deps, deploymentCols)
			}),
		},
	)
	return cmd
}

// agentOne is a command that acts on one Agent and prints it.
func agentOne(d deps, f *clientFlags, use, short, example string,
	call func(ctx context.Context, cn *conn, ns, id string) (apitypes.Agent, error)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Example: example, Args: cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			ns, id, err := cn.agentArg(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			a, err := call(cmd.Context(), cn, ns, id)
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, a, agentCols)
		}),
	}
}

// agentArg resolves the Namespace and an Agent argument.
func (cn *conn) agentArg(ctx context.Context, arg string) (string, string, error) {
	ns, err := cn.namespaceID(ctx)
	if err != nil {
		return "", "", err
	}
	id, err := resolveAgent(ctx, cn.c, ns, arg)
	return ns, id, err
}

func newAgentCreateCmd(d deps, f *clientFlags) *cobra.Command {
	var configuration, filesDir string
	cmd := &cobra.Command{
		Use:   "create NAME --configuration CONFIGURATION [--files DIR]",
		Short: "Create an Agent, optionally with initial persona files",
		Long: `Create an Agent called NAME that runs CONFIGURATION (a name or id).

With --files DIR, the files of DIR named AGENTS.md, SOUL.md, IDENTITY.md
and USER.md (any of them; others are not read) are staged privately as
the Agent's initial workspace files for its first deployment; the ones
missing start from OpenClaw's defaults. occ sends the id of the server's
workspace defaults with them (GET /workspace-defaults), so the server
refuses the files if its defaults are not the ones they were written
against. Create does not deploy: run "occ agent deploy NAME --wait".`,
		Example: "  occ agent create helper --configuration base -n team-a\n" +
			"  occ agent create helper --configuration base --files ./persona",
		Args: cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			ctx := cmd.Context()
			in := apitypes.CreateAgentRequest{Name: args[0]}
			if filesDir != "" {
				files, err := readPersonaDir(filesDir)
				if err != nil {
					return err
				}
				b, err := json.Marshal(files)
				if err != nil {
					return runtimeError(err)
				}
				in.InitialWorkspaceFiles = b
			}
			defs, err := cn.c.WorkspaceDefaults(ctx)
			if err != nil {
				return apiError(err)
			}
			in.WorkspaceDefaultsID = &defs.ID
			ns, err := cn.namespaceID(ctx)
			if err != nil {
				return err
			}
			if in.ConfigurationID, err = resolveConfiguration(ctx, cn.c, ns, configuration); err != nil {
				return err
			}
			a, err := cn.c.CreateAgent(ctx, ns, in)
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, a, agentCols)
		}),
	}
	cmd.Flags().StringVar(&configuration, "configuration", "", "the Configuration the Agent runs (name or id)")
	_ = cmd.MarkFlagRequired("configuration")
	cmd.Flags().StringVar(&filesDir, "files", "", "directory holding initial persona files (AGENTS.md, SOUL.md, IDENTITY.md, USER.md)")
	_ = cmd.MarkFlagDirname("files")
	return cmd
}

// readPersonaDir reads the persona files present in dir. dir itself must
// be a directory occ can read: a missing file is skipped below, so
// without this check a mistyped path would read as a directory that holds
// none of the files.
func readPersonaDir(dir string) (map[string]string, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, usageError(fmt.Errorf("the --files directory %s does not exist", dir))
	case err != nil:
		// The *PathError would repeat dir; keep only its cause.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, usageError(fmt.Errorf("cannot read the --files directory %s: %w", dir, err))
	case !fi.IsDir():
		return nil, usageError(fmt.Errorf("--files %s is not a directory", dir))
	}
	files := map[string]string{}
	for _, name := range personaFiles {
		b, err := readInput(deps{}, filepath.Join(dir, name), name, "; an initial file holds at most 16,384")
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files[name] = string(b)
	}
	if len(files) == 0 {
		return nil, usageError(fmt.Errorf("%s holds none of %v", dir, personaFiles))
	}
	return files, nil
}

func newAgentDeployCmd(d deps, f *clientFlags) *cobra.Command {
	var wait bool
	var timeout, interval time.Duration
	cmd := &cobra.Command{
		Use:   "deploy AGENT [--wait]",
		Short: "Deploy a new revision of an Agent, and optionally wait for it",
		Long: `Queue a deployment of a new revision of AGENT (from its current
Configuration) and print the revision; its id is the deployment id.

With --wait, follow the deployment until it succeeds or fails, at most
--timeout: one line on standard error for each change of state (plain
lines, readable in a log or a pipe), then the deployment on standard
output. A failed deployment exits 1 with its error; a timeout exits 7 and
leaves the deployment running on the server. Each poll waits at most 30s
for an answer; a server that does not answer one also exits 7, and says so.`,
		Example: "  occ agent deploy helper\n  occ agent deploy helper --wait --timeout 5m",
		Args:    cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			ctx := cmd.Context()
			ns, id, err := cn.agentArg(ctx, args[0])
			if err != nil {
				return err
			}
			rev, err := cn.c.DeployAgent(ctx, ns, id)
			if err != nil {
				return apiError(err)
			}
			if !wait {
				return printOne(cn.out, rev, revisionCols)
			}
			cn.info("deployment %s (revision %d) queued", rev.ID, rev.Number)
			wctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			dep, err := cn.c.WaitForDeployment(wctx, ns, id, rev.ID, interval, func(dep apitypes.Deployment) {
				cn.info("%s", progressLine(dep))
			})
			if err != nil {
				// Each poll has its own deadline (the client's request
				// timeout), so a GET that hangs is the server not
				// answering, said as such, rather than a deployment that
				// did not finish within --timeout.
				if errors.Is(err, client.ErrPollTimeout) {
					return &exitError{code: exitUnreachable, err: fmt.Errorf(
						"the server did not answer a poll of deployment %s within %s; the deployment's state is unknown, "+
							"it may still be running on the server (occ agent deployments %s %s)",
						rev.ID, cn.d.clientTimeout(), args[0], rev.ID)}
				}
				if wctx.Err() != nil && ctx.Err() == nil {
					return &exitError{code: exitUnreachable, err: fmt.Errorf(
						"deployment %s did not finish within %s; it continues on the server (occ agent deployments %s %s)",
						rev.ID, timeout, args[0], rev.ID)}
				}
				return apiError(err)
			}
			if perr := printOne(cn.out, dep, deploymentCols); perr != nil {
				return perr
			}
			if dep.Status == apitypes.DeploymentFailed {
				msg := "deployment " + dep.ID + " failed"
				if dep.Error != nil {
					msg += ": " + dep.Error.Code + ": " + dep.Error.Message
				}
				return runtimeError(errors.New(msg))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the deployment succeeds or fails")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "with --wait: how long to wait")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with --wait: how often to poll")
	return cmd
}

// progressLine describes one state of a deployment in one line.
func progressLine(d apitypes.Deployment) string {
	s := fmt.Sprintf("deployment %s: %s", d.ID, d.Status)
	if p := d.Progress; p != nil && p.Attempts > 0 {
		s += fmt.Sprintf(" (attempt %d", p.Attempts)
		if p.LastAttempt != nil {
			s += ", last: " + p.LastAttempt.Code + " " + p.LastAttempt.Message
		}
		if p.NextAttemptAt != nil {
			s += ", next at " + timeCell(*p.NextAttemptAt)
		}
		s += ")"
	}
	if d.Error != nil {
		s += ": " + d.Error.Code + ": " + d.Error.Message
	}
	return s
}
