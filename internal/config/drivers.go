package config

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ComputeDriver is what configuration knows of one Compute driver: its
// name, a line for --help and how to check its section of the config file.
// The table of them is the driver registry (internal/compute/registry),
// which config cannot import: it compiles every driver and their client
// libraries, and config must stay importable by every layer (see
// docs/architecture.md). The commands pass the registry's table to
// RegisterFlags, Load and Validate instead.
type ComputeDriver struct {
	// Name is the value of --compute-driver that selects the driver.
	Name string
	// Summary says in a few words what the driver does; --help shows it.
	Summary string
	// Check decodes and validates the driver's section of the file,
	// drivers.compute.<Name>; s is nil when the file has none. Its errors
	// are shown as they are, one per joined error (see Section.Invalid).
	// A nil Check means the driver takes no section: one in the file is an
	// unknown key.
	Check func(s *Section) error
}

// ComputeDrivers is the table of Compute drivers; the first entry is the
// default, selected when ComputeDriver is empty.
type ComputeDrivers []ComputeDriver

// Lookup returns the driver called name; "" names the default.
func (ds ComputeDrivers) Lookup(name string) (ComputeDriver, bool) {
	if name == "" && len(ds) > 0 {
		return ds[0], true
	}
	for _, d := range ds {
		if d.Name == name {
			return d, true
		}
	}
	return ComputeDriver{}, false
}

// Default is the name of the default driver, "" for an empty table.
func (ds ComputeDrivers) Default() string {
	if len(ds) == 0 {
		return ""
	}
	return ds[0].Name
}

// names lists the drivers for messages: "a, b, c".
func (ds ComputeDrivers) names() string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Name
	}
	return strings.Join(out, ", ")
}

// usage is the --compute-driver help: "Compute backend for Agents: a (what
// it does), b (...) or c (...)".
func (ds ComputeDrivers) usage() string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Name
		if d.Summary != "" {
			parts[i] += " (" + d.Summary + ")"
		}
	}
	s := "Compute backend for Agents"
	switch n := len(parts); n {
	case 0:
		return s
	case 1:
		return s + ": " + parts[0]
	default:
		return s + ": " + strings.Join(parts[:n-1], ", ") + " or " + parts[n-1]
	}
}

// computeErrors checks the driver selection against the table: the name
// must be known, only the selected driver may have a section, and the
// selected driver's Check must accept its section (or its absence).
func (c *Config) computeErrors(drivers ComputeDrivers) []error {
	d, ok := drivers.Lookup(c.ComputeDriver)
	if !ok {
		return []error{fmt.Errorf("compute driver %q is not one of %s", c.ComputeDriver, drivers.names())}
	}
	var errs []error
	for _, name := range sortedKeys(c.ComputeSections) {
		if name != d.Name {
			// A section for a driver that is not selected is a mistake
			// that fails open: the operator believes Agents run there.
			errs = append(errs, fmt.Errorf("%s%s is set but the compute driver is %q; select driver %s or remove the section",
				computeKey, name, d.Name, name))
		}
	}
	if d.Check != nil {
		if err := d.Check(c.ComputeSections[d.Name]); err != nil {
			errs = append(errs, unjoin(err)...)
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// computeKey is the file key under which each driver has its section.
const computeKey = "drivers.compute."

// Section is one driver's section of the config file, kept undecoded: its
// schema and validation belong to the driver, which decodes it with
// Decode. Only the file has sections; they have no flags or environment
// variables.
type Section struct {
	// Key is the section's dotted key, like drivers.compute.<name>.
	Key string
	// Node is the section's YAML value, with the file's line numbers.
	Node yaml.Node
}

// Decode decodes the section into v (a pointer) as strictly as the rest of
// the file is decoded: a key v has no field for is an error naming the key
// by its dotted path (`line 5: unknown key "drivers.compute.x.y"`), and
// values of the wrong type and repeated keys are errors with their line
// numbers. All problems are reported at once, in line order, joined with
// "; ".
func (s *Section) Decode(v any) error {
	var msgs []string
	structs := map[string]bool{}
	unknownKeys(&s.Node, reflect.TypeOf(v), s.Key, &msgs, structs)
	if err := s.Node.Decode(v); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
		}
		for _, m := range te.Errors {
			msgs = append(msgs, renameStructs(m, structs))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	slices.SortStableFunc(msgs, func(a, b string) int { return lineOf(a) - lineOf(b) })
	return errors.New(strings.Join(msgs, "; "))
}

// Invalid turns a driver's validation error (errors.Join of messages
// relative to the section, like "network.gatewayPort must be ...") into
// errors naming the full key, one per joined error. It returns nil for nil.
func (s *Section) Invalid(err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		errs = append(errs, fmt.Errorf("%s.%w", s.Key, e))
	}
	return errors.Join(errs...)
}

var lineRE = regexp.MustCompile(`^line (\d+):`)

// lineOf is the line number a yaml message starts with; 0 when none.
func lineOf(msg string) int {
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// renameStructs says "into a mapping" instead of naming a Go struct type
// in "cannot unmarshal !!str `x` into kubecfg.Network".
func renameStructs(msg string, structs map[string]bool) string {
	for name := range structs {
		msg = strings.Replace(msg, "into "+name, "into a mapping", 1)
	}
	return msg
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// unknownKeys walks n along type t and reports every mapping key that t
// has no field for, by its dotted path under key. yaml.v3's strict mode
// (KnownFields) is only available when decoding a whole document from
// bytes, which would lose the section's line numbers; this walk gives the
// same check on the node. Shape mismatches (a scalar where t wants a
// mapping) are left to Decode, which reports them. structs collects the
// Go struct type names seen, for renameStructs.
func unknownKeys(n *yaml.Node, t reflect.Type, key string, msgs *[]string, structs map[string]bool) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // decodes itself
	}
	switch t.Kind() {
	case reflect.Struct:
		structs[t.String()] = true
		if n.Kind != yaml.MappingNode {
			return
		}
		fields, open := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" {
				unknownKeys(val, t, key, msgs, structs)
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				if !open {
					*msgs = append(*msgs, fmt.Sprintf("line %d: unknown key %q", k.Line, key+"."+k.Value))
				}
				continue
			}
			unknownKeys(val, ft, key+"."+k.Value, msgs, structs)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			unknownKeys(n.Content[i+1], t.Elem(), key+"."+n.Content[i].Value, msgs, structs)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for _, item := range n.Content {
			unknownKeys(item, t.Elem(), key, msgs, structs)
		}
	}
}

// yamlFields maps the YAML keys of struct t to their field types, with
// yaml.v3's rules: the tag's name, else the lower-cased field name; "-"
// skipped; ",inline" structs merged in. open is true when an inline map
// takes every other key.
func yamlFields(t reflect.Type) (fields map[string]reflect.Type, open bool) {
	fields = map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Map:
				open = true
			case reflect.Struct:
				inner, innerOpen := yamlFields(ft)
				for k, v := range inner {
					fields[k] = v
				}
				open = open || innerOpen
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fields[name] = f.Type
	}
	return fields, open
}
