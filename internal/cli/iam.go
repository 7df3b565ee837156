package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/openclaw/occ/apitypes"
)

// The administrator commands: users, service principals, keys, roles,
// access bindings and restrictions (docs/authorization.md).

var userCols = []column[apitypes.User]{
	{"ID", func(u apitypes.User) string { return u.ID }},
	{"EMAIL", func(u apitypes.User) string { return u.Email }},
	{"CREATED", func(u apitypes.User) string { return timeCell(u.CreatedAt) }},
}

func newUserCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "user", "Create users and revoke their credentials (administrators)",
		"  printf '%s\\n' \"$PASSWORD\" | occ user create --email dev@example.com --password-stdin\n  occ user revoke-credentials usr_…")
	addClientFlags(cmd, f, false)
	var email string
	var passwordStdin bool
	create := &cobra.Command{
		Use:   "create --email EMAIL [--password-stdin]",
		Short: "Create a user with a password (prompted without echo, or from standard input)",
		Example: "  occ user create --email dev@example.com\n" +
			"  printf '%s\\n' \"$PASSWORD\" | occ user create --email dev@example.com --password-stdin",
		Args: cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			pw, err := readPassword(d, passwordStdin)
			if err != nil {
				return err
			}
			u, err := cn.c.CreateUser(cmd.Context(), apitypes.CreateUserRequest{Email: email, Password: pw})
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, u, userCols)
		}),
	}
	create.Flags().StringVar(&email, "email", "", "the user's email")
	_ = create.MarkFlagRequired("email")
	create.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input")
	revoke := &cobra.Command{
		Use:   "revoke-credentials USER_ID",
		Short: "End every session of a user and revoke the service keys the user issued, at once",
		Long: `End every browser session of the user USER_ID (usr_…) and revoke every
unrevoked service key that user issued, in one transaction with its audit
record: what an administrator runs when someone leaves or a device is lost.
Running it again succeeds and revokes nothing more.`,
		Example: "  occ user revoke-credentials usr_…\n  occ user revoke-credentials usr_… --output json",
		Args:    cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			r, err := cn.c.RevokeUserCredentials(cmd.Context(), args[0])
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, r, []column[apitypes.RevokedCredentials]{
				{"USER", func(r apitypes.RevokedCredentials) string { return r.UserID }},
				{"SESSIONS REVOKED", func(r apitypes.RevokedCredentials) string { return fmt.Sprint(r.SessionsRevoked) }},
				{"KEYS REVOKED", func(r apitypes.RevokedCredentials) string { return fmt.Sprint(r.KeysRevoked) }},
			})
		}),
	}
	cmd.AddCommand(create, revoke)
	return cmd
}

var sessionCols = []column[apitypes.SessionInfo]{
	{"ID", func(s apitypes.SessionInfo) string { return s.ID }},
	{"CURRENT", func(s apitypes.SessionInfo) string {
		if s.Current {
			return "*"
		}
		return ""
	}},
	{"CREATED", func(s apitypes.SessionInfo) string { return timeCell(s.CreatedAt) }},
	{"LAST USED", func(s apitypes.SessionInfo) string { return timeCell(s.LastUsedAt) }},
	{"IDLE EXPIRES", func(s apitypes.SessionInfo) string { return timeCell(s.IdleExpiresAt) }},
	{"EXPIRES", func(s apitypes.SessionInfo) string { return timeCell(s.ExpiresAt) }},
}

func newSessionCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "session", "List and end your own browser sessions (signed in with occ login --email)",
		"  occ session list\n  occ session revoke ses_…")
	addClientFlags(cmd, f, false)
	list := &cobra.Command{
		Use:     "list",
		Short:   "List your live sessions, newest first; * marks the one this command used",
		Example: "  occ session list\n  occ session list --output json",
		Args:    cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			l, err := cn.c.ListSessions(cmd.Context())
			if err != nil {
				return apiError(err)
			}
			return printList(cn.out, l, sessionCols)
		}),
	}
	revoke := &cobra.Command{
		Use:     "revoke SESSION_ID",
		Short:   "End one of your sessions at once (another user's answers not found)",
		Example: "  occ session revoke ses_…",
		Args:    cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			r, err := cn.c.RevokeSession(cmd.Context(), args[0])
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, r, []column[apitypes.RevokedSession]{
				{"ID", func(r apitypes.RevokedSession) string { return r.ID }},
				{"REVOKED", func(r apitypes.RevokedSession) string { return fmt.Sprint(r.Revoked) }},
			})
		}),
	}
	cmd.AddCommand(list, revoke)
	return cmd
}

var servicePrincipalCols = []column[apitypes.ServicePrincipal]{
	{"ID", func(s apitypes.ServicePrincipal) string { return s.ID }},
	{"NAME", func(s apitypes.ServicePrincipal) string { return s.Name }},
	{"NAMESPACE", func(s apitypes.ServicePrincipal) string { return s.NamespaceID }},
	{"AGENT", func(s apitypes.ServicePrincipal) string { return s.AgentID }},
	{"CREATED", func(s apitypes.ServicePrincipal) string { return timeCell(s.CreatedAt) }},
}

func newServicePrincipalCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "service-principal", "Manage service principals, the identities of automation",
		"  occ service-principal create deployer\n  occ service-principal list")
	cmd.Aliases = []string{"sp"}
	addClientFlags(cmd, f, false)
	var namespace string
	create := &cobra.Command{
		Use: "create NAME [--namespace NS]", Short: "Create a service principal, optionally limited to one Namespace",
		Example: "  occ service-principal create deployer\n  occ service-principal create ci --namespace team-a",
		Args:    cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			in := apitypes.CreateServicePrincipalRequest{Name: args[0]}
			if namespace != "" {
				id, err := resolveNamespace(cmd.Context(), cn.c, namespace)
				if err != nil {
					return err
				}
				in.NamespaceID = id
			}
			s, err := cn.c.CreateServicePrincipal(cmd.Context(), in)
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, s, servicePrincipalCols)
		}),
	}
	create.Flags().StringVarP(&namespace, "namespace", "n", "", "limit the principal to this Namespace (name or id)")
	cmd.AddCommand(
		pagedList(d, f, "List service principals (every page, or one with --limit/--cursor)", "  occ service-principal list", servicePrincipalCols,
			func(ctx context.Context, cn *conn) ([]apitypes.ServicePrincipal, error) {
				return cn.c.ListServicePrincipals(ctx)
			},
			func(ctx context.Context, cn *conn, q apitypes.ListQuery) (apitypes.List[apitypes.ServicePrincipal], error) {
				return cn.c.ListServicePrincipalsPage(ctx, q)
			}),
		create,
		&cobra.Command{
			Use: "get ID", Short: "Show a service principal", Args: cobra.ExactArgs(1), Example: "  occ service-principal get sa_…",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				s, err := cn.c.GetServicePrincipal(cmd.Context(), args[0])
				if err != nil {
					return apiError(err)
				}
				return printOne(cn.out, s, servicePrincipalCols)
			}),
		},
		deleteCmd(d, f, "delete ID", "Delete a service principal (its keys stop working)", "  occ service-principal delete sa_…",
			func(ctx context.Context, cn *conn, id string) (apitypes.Deleted, error) {
				return cn.c.DeleteServicePrincipal(ctx, id)
			}),
	)
	return cmd
}

// deleteCmd is a command that deletes one resource by id.
func deleteCmd(d deps, f *clientFlags, use, short, example string,
	call func(ctx context.Context, cn *conn, id string) (apitypes.Deleted, error)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Example: example, Args: cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			r, err := call(cmd.Context(), cn, args[0])
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, r, deletedCols)
		}),
	}
}

func newKeyCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "key", "Create and revoke service keys (administrators)",
		"  occ key create --service-principal sa_… --name ci > key\n  occ key revoke key_…")
	addClientFlags(cmd, f, false)
	var sp, name, namespace string
	var expiresIn time.Duration
	create := &cobra.Command{
		Use:   "create --service-principal SA --name NAME [--namespace NS] [--expires-in DURATION]",
		Short: "Create a service key; the key is printed once, to standard output",
		Long: `Create a service key for the service principal SA. The secret key is shown
this once and never again (only its hash is stored): with --output table
(the default) it is the only thing on standard output, so redirect it to a
file (occ login --api-key-file FILE reads it); the key's id and expiry go
to standard error. --output json|yaml prints the whole apitypes.ServiceKey,
key included, to standard output.`,
		Example: "  occ key create --service-principal sa_… --name ci > ci.key\n" +
			"  occ key create --service-principal sa_… --name ci --namespace team-a --expires-in 168h --output json",
		Args: cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			in := apitypes.CreateServiceKeyRequest{ServicePrincipalID: sp, Name: name}
			if namespace != "" {
				id, err := resolveNamespace(cmd.Context(), cn.c, namespace)
				if err != nil {
					return err
				}
				in.NamespaceID = id
			}
			if expiresIn != 0 {
				secs := int64(expiresIn / time.Second)
				in.ExpiresIn = &secs
			}
			k, err := cn.c.CreateServiceKey(cmd.Context(), in)
			if err != nil {
				return apiError(err)
			}
			if cn.out.format != "table" {
				return cn.out.printValue(k)
			}
			cn.info("Created key %s (%s) for %s, expiring %s. The key is below; it is shown only this once.",
				k.ID, k.Name, k.ServicePrincipalID, timeCell(k.ExpiresAt))
			_, err = fmt.Fprintln(cn.d.stdout, k.Key)
			return writeError(err)
		}),
	}
	create.Flags().StringVar(&sp, "service-principal", "", "the service principal's id (sa_…)")
	create.Flags().StringVar(&name, "name", "", "a name for the key (1-32 characters)")
	create.Flags().StringVarP(&namespace, "namespace", "n", "", "limit the key to this Namespace (name or id)")
	create.Flags().DurationVar(&expiresIn, "expires-in", 0, "lifetime, 24h to 8760h (default: the server's, 30 days)")
	_ = create.MarkFlagRequired("service-principal")
	_ = create.MarkFlagRequired("name")
	revoke := &cobra.Command{
		Use: "revoke KEY_ID", Short: "Revoke a service key (revoking twice succeeds)", Args: cobra.ExactArgs(1),
		Example: "  occ key revoke key_…",
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			r, err := cn.c.RevokeServiceKey(cmd.Context(), args[0])
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, r, []column[apitypes.RevokedServiceKey]{
				{"ID", func(r apitypes.RevokedServiceKey) string { return r.ID }},
				{"REVOKED", func(r apitypes.RevokedServiceKey) string { return fmt.Sprint(r.Revoked) }},
			})
		}),
	}
	cmd.AddCommand(create, revoke)
	return cmd
}

var roleCols = []column[apitypes.Role]{
	{"ID", func(r apitypes.Role) string { return r.ID }},
	{"NAME", func(r apitypes.Role) string { return r.Name }},
	{"BUILTIN", func(r apitypes.Role) string { return fmt.Sprint(r.Builtin) }},
	{"NAMESPACE", func(r apitypes.Role) string { return r.NamespaceID }},
	{"PERMISSIONS", func(r apitypes.Role) string { return fmt.Sprint(len(r.Permissions)) }},
}

func newRoleCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "role", "Manage roles, named sets of permissions (administrators)",
		"  occ role list\n  occ role create reader --permission read:agent --permission read:agent_revision")
	addClientFlags(cmd, f, false)
	var perms []string
	var namespace string
	create := &cobra.Command{
		Use:     "create NAME --permission ACTION:KIND...",
		Short:   "Create a role from ACTION:KIND permissions",
		Example: "  occ role create deployer --permission deploy:agent --permission read:agent --permission read:configuration",
		Args:    cobra.ExactArgs(1),
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
			in := apitypes.CreateRoleRequest{Name: args[0], Permissions: []apitypes.Permission{}}
			for _, p := range perms {
				action, kind, ok := strings.Cut(p, ":")
				if !ok || action == "" || kind == "" {
					return usageError(fmt.Errorf("--permission %q: want ACTION:KIND, like read:agent", p))
				}
				in.Permissions = append(in.Permissions, apitypes.Permission{Action: apitypes.Action(action),
					ResourceKind: apitypes.ResourceKind(kind)})
			}
			if namespace != "" {
				id, err := resolveNamespace(cmd.Context(), cn.c, namespace)
				if err != nil {
					return err
				}
				in.NamespaceID = id
			}
			r, err := cn.c.CreateRole(cmd.Context(), in)
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, r, roleCols)
		}),
	}
	create.Flags().StringArrayVar(&perms, "permission", nil, "a permission ACTION:KIND (repeatable)")
	create.Flags().StringVarP(&namespace, "namespace", "n", "", "define the role in this Namespace (name or id)")
	cmd.AddCommand(
		pagedList(d, f, "List roles (every page, or one with --limit/--cursor)", "  occ role list --output yaml", roleCols,
			func(ctx context.Context, cn *conn) ([]apitypes.Role, error) { return cn.c.ListRoles(ctx) },
			func(ctx context.Context, cn *conn, q apitypes.ListQuery) (apitypes.List[apitypes.Role], error) {
				return cn.c.ListRolesPage(ctx, q)
			}),
		create,
		&cobra.Command{
			Use: "get ROLE", Short: "Show a role (id or name) with its permissions", Args: cobra.ExactArgs(1),
			Example: "  occ role get editor --output yaml",
			RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, args []string) error {
				id, err := cn.roleID(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				r, err := cn.c.GetRole(cmd.Context(), id)
				if err != nil {
					return apiError(err)
				}
				return printOne(cn.out, r, roleCols)
			}),
		},
		deleteCmd(d, f, "delete ROLE", "Delete a role (id or name) no binding uses", "  occ role delete deployer",
			func(ctx context.Context, cn *conn, arg string) (apitypes.Deleted, error) {
				id, err := cn.roleID(ctx, arg)
				if err != nil {
					return apitypes.Deleted{}, err
				}
				return cn.c.DeleteRole(ctx, id)
			}),
	)
	return cmd
}

// roleID resolves a role's id or name (roles live installation-wide or
// in a Namespace, so a name can be ambiguous).
func (cn *conn) roleID(ctx context.Context, arg string) (string, error) {
	if strings.HasPrefix(arg, "role_") {
		return arg, nil
	}
	l, err := cn.c.ListRoles(ctx)
	if err != nil {
		return "", apiError(err)
	}
	return pick("role", arg, l, func(r apitypes.Role) (string, string) { return r.Name, r.ID })
}

// scopeFlags are the scope of a binding or restriction.
type scopeFlags struct {
	namespace, resourceKind, resourceID string
}

func (s *scopeFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&s.namespace, "namespace", "n", "", "scope: this Namespace (name or id)")
	cmd.Flags().StringVar(&s.resourceKind, "resource-kind", "", "scope: resources of this kind (with --resource)")
	cmd.Flags().StringVar(&s.resourceID, "resource", "", "scope: this exact resource id (with --namespace)")
}

func (s *scopeFlags) resolve(ctx context.Context, cn *conn) (string, error) {
	if s.namespace == "" {
		return "", nil
	}
	return resolveNamespace(ctx, cn.c, s.namespace)
}

var bindingCols = []column[apitypes.AccessBinding]{
	{"ID", func(b apitypes.AccessBinding) string { return b.ID }},
	{"SUBJECT", func(b apitypes.AccessBinding) string { return b.SubjectID }},
	{"ROLE", func(b apitypes.AccessBinding) string { return b.RoleID }},
	{"NAMESPACE", func(b apitypes.AccessBinding) string { return b.NamespaceID }},
	{"RESOURCE", func(b apitypes.AccessBinding) string {
		return strings.TrimSpace(string(b.ResourceKind) + " " + b.ResourceID)
	}},
}

func newBindingCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "binding", "Grant roles to users and service principals (administrators)",
		"  occ binding create --subject sa_… --role editor --namespace team-a\n  occ binding list")
	addClientFlags(cmd, f, false)
	var subject, role string
	var scope scopeFlags
	create := &cobra.Command{
		Use:   "create --subject ID --role ROLE [--namespace NS [--resource-kind KIND --resource ID]]",
		Short: "Grant a role installation-wide, in a Namespace, or on one resource",
		Example: "  occ binding create --subject sa_… --role editor --namespace team-a\n" +
			"  occ binding create --subject usr_… --role viewer --namespace team-a --resource-kind agent --resource agt_…",
		Args: cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			ctx := cmd.Context()
			roleID, err := cn.roleID(ctx, role)
			if err != nil {
				return err
			}
			ns, err := scope.resolve(ctx, cn)
			if err != nil {
				return err
			}
			b, err := cn.c.CreateAccessBinding(ctx, apitypes.CreateAccessBindingRequest{SubjectID: subject, RoleID: roleID,
				NamespaceID: ns, ResourceKind: apitypes.ResourceKind(scope.resourceKind), ResourceID: scope.resourceID})
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, b, bindingCols)
		}),
	}
	create.Flags().StringVar(&subject, "subject", "", "the user (usr_…) or service principal (sa_…)")
	create.Flags().StringVar(&role, "role", "", "the role (id or name)")
	_ = create.MarkFlagRequired("subject")
	_ = create.MarkFlagRequired("role")
	scope.register(create)
	cmd.AddCommand(
		pagedList(d, f, "List access bindings (every page, or one with --limit/--cursor)", "  occ binding list", bindingCols,
			func(ctx context.Context, cn *conn) ([]apitypes.AccessBinding, error) {
				return cn.c.ListAccessBindings(ctx)
			},
			func(ctx context.Context, cn *conn, q apitypes.ListQuery) (apitypes.List[apitypes.AccessBinding], error) {
				return cn.c.ListAccessBindingsPage(ctx, q)
			}),
		create,
		deleteCmd(d, f, "delete ID", "Delete an access binding", "  occ binding delete bnd_…",
			func(ctx context.Context, cn *conn, id string) (apitypes.Deleted, error) {
				return cn.c.DeleteAccessBinding(ctx, id)
			}),
	)
	return cmd
}

var restrictionCols = []column[apitypes.Restriction]{
	{"ID", func(r apitypes.Restriction) string { return r.ID }},
	{"SUBJECT", func(r apitypes.Restriction) string { return r.SubjectID }},
	{"EFFECT", func(r apitypes.Restriction) string { return r.Effect }},
	{"ACTION", func(r apitypes.Restriction) string { return string(r.Action) }},
	{"KIND", func(r apitypes.Restriction) string { return string(r.ResourceKind) }},
	{"NAMESPACE", func(r apitypes.Restriction) string { return r.NamespaceID }},
	{"RESOURCE", func(r apitypes.Restriction) string { return r.ResourceID }},
}

func newRestrictionCmd(d deps) *cobra.Command {
	f := &clientFlags{}
	cmd := groupCmd(d, "restriction", "Deny one action to a subject, whatever it is granted (administrators)",
		"  occ restriction create --subject sa_… --action delete --resource-kind agent --namespace team-a")
	addClientFlags(cmd, f, false)
	var subject, action string
	var scope scopeFlags
	create := &cobra.Command{
		Use:     "create --subject ID --action ACTION --resource-kind KIND [--namespace NS [--resource ID]]",
		Short:   "Deny ACTION on KIND to a subject, installation-wide, in a Namespace or on one resource",
		Example: "  occ restriction create --subject usr_… --action operate --resource-kind agent --namespace team-a --resource agt_…",
		Args:    cobra.NoArgs,
		RunE: withConn(d, f, func(cmd *cobra.Command, cn *conn, _ []string) error {
			if scope.resourceKind == "" {
				return usageError(errors.New("--resource-kind is required"))
			}
			ns, err := scope.resolve(cmd.Context(), cn)
			if err != nil {
				return err
			}
			r, err := cn.c.CreateRestriction(cmd.Context(), apitypes.CreateRestrictionRequest{SubjectID: subject,
				Action: apitypes.Action(action), ResourceKind: apitypes.ResourceKind(scope.resourceKind), NamespaceID: ns,
				ResourceID: scope.resourceID})
			if err != nil {
				return apiError(err)
			}
			return printOne(cn.out, r, restrictionCols)
		}),
	}
	create.Flags().StringVar(&subject, "subject", "", "the user (usr_…) or service principal (sa_…)")
	create.Flags().StringVar(&action, "action", "", "the denied action (create, read, update, delete, deploy, operate, …)")
	_ = create.MarkFlagRequired("subject")
	_ = create.MarkFlagRequired("action")
	scope.register(create)
	cmd.AddCommand(
		pagedList(d, f, "List restrictions (every page, or one with --limit/--cursor)", "  occ restriction list", restrictionCols,
			func(ctx context.Context, cn *conn) ([]apitypes.Restriction, error) { return cn.c.ListRestrictions(ctx) },
			func(ctx context.Context, cn *conn, q apitypes.ListQuery) (apitypes.List[apitypes.Restriction], error) {
				return cn.c.ListRestrictionsPage(ctx, q)
			}),
		create,
		deleteCmd(d, f, "delete ID", "Delete a restriction", "  occ restriction delete rst_…",
			func(ctx context.Context, cn *conn, id string) (apitypes.Deleted, error) {
				return cn.c.DeleteRestriction(ctx, id)
			}),
	)
	return cmd
}
