package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// clusterSection is the schema of the test table's "cluster" driver: it
// has nested sections, a map of sections, a list of sections, an inline
// struct and a field without a tag, like real driver sections.
type clusterSection struct {
	Endpoint string            `yaml:"endpoint"`
	Port     int               `yaml:"port"`
	Network  *clusterNetwork   `yaml:"network"`
	Pools    map[string]pool   `yaml:"pools"`
	Rules    []rule            `yaml:"rules"`
	Labels   map[string]string `yaml:"labels"`
	Common   `yaml:",inline"`
	Plain    string
	Ignored  string `yaml:"-"`
}

type clusterNetwork struct {
	CIDRs []string `yaml:"cidrs"`
}

type pool struct {
	Size int `yaml:"size"`
}

type rule struct {
	Allow string `yaml:"allow"`
}

type Common struct {
	Region string `yaml:"region"`
}

// checkCluster is the "cluster" driver's Check: the section is required,
// decoded strictly and validated.
func checkCluster(s *Section) error {
	if s == nil {
		return errors.New("compute driver cluster needs the drivers.compute.cluster section")
	}
	var c clusterSection
	if err := s.Decode(&c); err != nil {
		return err
	}
	var errs []error
	if c.Endpoint == "" {
		errs = append(errs, errors.New("endpoint is required"))
	}
	if c.Port < 0 {
		errs = append(errs, fmt.Errorf("port %d is negative", c.Port))
	}
	return s.Invalid(errors.Join(errs...))
}

// testDrivers stands in for the driver registry, which config cannot
// import: a default driver without a section, one with a section, and a
// third without.
var testDrivers = ComputeDrivers{
	{Name: "embedded", Summary: "runs here"},
	{Name: "cluster", Summary: "configured in drivers.compute.cluster", Check: checkCluster},
	{Name: "disabled"},
}

// load is Load with the test driver table.
func load(flags *pflag.FlagSet, env func(string) string) (Config, error) {
	return Load(flags, env, testDrivers)
}

func TestComputeDriverSelection(t *testing.T) {
	const cluster = "drivers:\n  compute:\n    driver: cluster\n    cluster:\n      endpoint: https://cluster.example\n"
	tests := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want string // "" means valid; otherwise a substring of the error
	}{
		{name: "default driver without a file"},
		{name: "default selected by name", file: "drivers:\n  compute:\n    driver: embedded\n"},
		{name: "empty compute section", file: "drivers:\n  compute:\n"},
		{name: "driver with its section", file: cluster},
		{name: "empty section is no section", file: "drivers:\n  compute:\n    cluster:\n"},
		{
			name: "unknown driver",
			args: []string{"--compute-driver", "docker"},
			want: `compute driver "docker" is not one of embedded, cluster, disabled`,
		},
		{
			name: "required section missing",
			args: []string{"--compute-driver", "cluster"},
			want: "compute driver cluster needs the drivers.compute.cluster section",
		},
		{
			name: "section with another driver",
			file: strings.Replace(cluster, "driver: cluster", "driver: disabled", 1),
			want: `drivers.compute.cluster is set but the compute driver is "disabled"; select driver cluster or remove the section`,
		},
		{
			name: "section with the default driver",
			file: strings.Replace(cluster, "    driver: cluster\n", "", 1),
			want: `drivers.compute.cluster is set but the compute driver is "embedded"`,
		},
		{
			name: "section with the driver overridden by env",
			file: cluster,
			env:  map[string]string{"OCC_COMPUTE_DRIVER": "embedded"},
			want: `drivers.compute.cluster is set but the compute driver is "embedded"`,
		},
		{
			name: "section of a driver that takes none",
			file: "drivers:\n  compute:\n    driver: embedded\n    embedded: {x: 1}\n",
			want: `line 4: unknown key "drivers.compute.embedded"`,
		},
		{
			name: "section of an unknown driver",
			file: "drivers:\n  compute:\n    driver: embedded\n    docker: {}\n",
			want: `line 4: unknown key "drivers.compute.docker"`,
		},
		{
			name: "compute must be a mapping",
			file: "drivers:\n  compute: cluster\n",
			want: "line 2: cannot unmarshal !!str `cluster` into a mapping",
		},
		{
			name: "driver must be a string",
			file: "drivers:\n  compute:\n    driver: [a]\n",
			want: "line 3: cannot unmarshal !!seq into string",
		},
		{
			name: "repeated section",
			file: cluster + "    cluster: {}\n",
			want: `line 6: mapping key "cluster" already defined at line 4`,
		},
		{
			name: "validation errors name the full key",
			file: strings.Replace(cluster, "endpoint: https://cluster.example", "port: -1", 1),
			want: "drivers.compute.cluster.endpoint is required\ndrivers.compute.cluster.port -1 is negative",
		},
		{
			name: "errors of the section and other invalid values together",
			file: "listen: x\n" + strings.Replace(cluster, "endpoint:", "endpont:", 1),
			want: "listen address \"x\" is not host:port (like 127.0.0.1:8080)\nline 6: unknown key \"drivers.compute.cluster.endpont\"",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			if tt.file != "" {
				env[EnvConfig] = writeConfig(t, tt.file)
			}
			for k, v := range tt.env {
				env[k] = v
			}
			_, err := load(parseFlags(t, tt.args...), mapEnv(env))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Load(file %q, args %q): %v", tt.file, tt.args, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Load(file %q, args %q) error = %v, want it to contain %q", tt.file, tt.args, err, tt.want)
			}
		})
	}
}

func TestComputeSectionKept(t *testing.T) {
	file := "drivers:\n  compute:\n    driver: cluster\n    cluster:\n      endpoint: https://cluster.example\n"
	got, err := load(nil, mapEnv(map[string]string{EnvConfig: writeConfig(t, file)}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got.ComputeDriver != "cluster" {
		t.Errorf("ComputeDriver = %q, want cluster", got.ComputeDriver)
	}
	s := got.ComputeSections["cluster"]
	if s == nil || len(got.ComputeSections) != 1 {
		t.Fatalf("ComputeSections = %v, want only cluster", got.ComputeSections)
	}
	var c clusterSection
	if err := s.Decode(&c); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if s.Key != "drivers.compute.cluster" || c.Endpoint != "https://cluster.example" || s.Node.Line != 5 {
		t.Errorf("section = key %q, line %d, decoded %+v", s.Key, s.Node.Line, c)
	}
}

// TestSectionDecode checks the strict decoding drivers rely on: unknown
// keys at any depth named by their full key with the line, type errors in
// the user's terms, everything in line order.
func TestSectionDecode(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want clusterSection
		err  string // the whole error; "" means none
	}{
		{
			name: "every kind of field",
			yaml: "endpoint: e\nport: 2\nnetwork: {cidrs: [10.0.0.0/8]}\npools: {a: {size: 3}}\nrules: [{allow: x}]\nlabels: {k: v}\nregion: r\nplain: p\n",
			want: clusterSection{Endpoint: "e", Port: 2, Network: &clusterNetwork{CIDRs: []string{"10.0.0.0/8"}},
				Pools: map[string]pool{"a": {Size: 3}}, Rules: []rule{{Allow: "x"}}, Labels: map[string]string{"k": "v"},
				Common: Common{Region: "r"}, Plain: "p"},
		},
		{
			name: "anchored unknown key",
			yaml: "base: &b {size: 1}\n",
			err:  `line 1: unknown key "drivers.compute.cluster.base"`,
		},
		{
			name: "merged keys are checked",
			yaml: "pools:\n  a: &a {size: 1}\n  b:\n    <<: *a\n",
			want: clusterSection{Pools: map[string]pool{"a": {Size: 1}, "b": {Size: 1}}},
		},
		{name: "unknown top key", yaml: "endpoint: e\nendpont: e\n", err: `line 2: unknown key "drivers.compute.cluster.endpont"`},
		{name: "unknown nested key", yaml: "network:\n  cidr: []\n", err: `line 2: unknown key "drivers.compute.cluster.network.cidr"`},
		{name: "unknown key in a map value", yaml: "pools:\n  a:\n    sise: 1\n", err: `line 3: unknown key "drivers.compute.cluster.pools.a.sise"`},
		{name: "unknown key in a list item", yaml: "rules:\n- allow: x\n- deny: y\n", err: `line 3: unknown key "drivers.compute.cluster.rules.deny"`},
		{name: "skipped field", yaml: "ignored: x\n", err: `line 1: unknown key "drivers.compute.cluster.ignored"`},
		{name: "struct is a mapping", yaml: "network: open\n", err: "line 1: cannot unmarshal !!str `open` into a mapping"},
		{name: "wrong scalar", yaml: "port: many\n", err: "line 1: cannot unmarshal !!str `many` into int"},
		{name: "repeated key", yaml: "port: 1\nport: 2\n", err: `line 2: mapping key "port" already defined at line 1`},
		{
			name: "all problems in line order",
			yaml: "port: x\nnetwork:\n  cidr: []\nextra: 1\n",
			err:  "line 1: cannot unmarshal !!str `x` into int; line 3: unknown key \"drivers.compute.cluster.network.cidr\"; line 4: unknown key \"drivers.compute.cluster.extra\"",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := "drivers:\n  compute:\n    driver: cluster\n    cluster:\n" + indent(tt.yaml, "      ")
			var fc fileConfig
			if err := decodeYAMLForTest(file, &fc); err != nil {
				t.Fatalf("decoding the file: %v", err)
			}
			_, sections, msgs := decodeCompute(&fc.Drivers.Compute, testDrivers)
			if len(msgs) != 0 {
				t.Fatalf("decodeCompute: %q", msgs)
			}
			var got clusterSection
			err := sections["cluster"].Decode(&got)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			// The section starts on line 5 of the file.
			wantErr := shiftLines(tt.err, 4)
			if gotErr != wantErr {
				t.Errorf("Decode error:\n got  %q\n want %q", gotErr, wantErr)
			}
			if tt.err == "" {
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Decode mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestComputeDriverHelp(t *testing.T) {
	fs := pflag.NewFlagSet("occ server", pflag.ContinueOnError)
	RegisterFlags(fs, testDrivers)
	f := fs.Lookup("compute-driver")
	if f == nil {
		t.Fatal("no --compute-driver flag")
	}
	want := "Compute backend for Agents: embedded (runs here), cluster (configured in drivers.compute.cluster) or disabled (env OCC_COMPUTE_DRIVER)"
	if f.Usage != want || f.DefValue != "embedded" {
		t.Errorf("--compute-driver usage %q default %q, want %q default embedded", f.Usage, f.DefValue, want)
	}
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.PrintDefaults()
	if !strings.Contains(out.String(), "(default embedded)") {
		t.Errorf("--help does not show the default driver:\n%s", out.String())
	}
}

var lineNumRE = regexp.MustCompile(`line \d+`)

func decodeYAMLForTest(file string, v any) error {
	return yaml.Unmarshal([]byte(file), v)
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

// shiftLines adds n to every "line N" in msg.
func shiftLines(msg string, n int) string {
	return lineNumRE.ReplaceAllStringFunc(msg, func(m string) string {
		var k int
		fmt.Sscanf(m, "line %d", &k)
		return fmt.Sprintf("line %d", k+n)
	})
}
