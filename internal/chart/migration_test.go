package chart

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
)

// TestMigrationJob: the migration hook Job tries occ migrate as often as
// docs/install-kubernetes.md says ("N tries" in its row of the objects
// table), which is spec.backoffLimit retries after the first try, and is
// rendered only with PostgreSQL and migration.enabled.
func TestMigrationJob(t *testing.T) {
	doc, err := os.ReadFile("../../docs/install-kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\| Job \\(hook\\) \\| `<release>-occ-migrate` \\|.*\\((\\d+) tries").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/install-kubernetes.md has no row | Job (hook) | `<release>-occ-migrate` | saying how many tries")
	}
	tries, err := strconv.Atoi(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}

	name := release + "-occ-migrate"
	for _, tt := range []struct {
		name string
		sets []string
		want bool
	}{
		{"postgres", nil, true},
		{"migration off", []string{"migration.enabled=false"}, false},
		{"sqlite", []string{"database.mode=sqlite"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, []string{valuesFile("routing-off")}, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			var job batchv1.Job
			if found := decodeObject(t, out, "Job", name, &job); found != tt.want {
				t.Fatalf("Job %s rendered: %v, want %v", name, found, tt.want)
			}
			if !tt.want {
				return
			}
			// backoffLimit counts retries: the Job fails after
			// backoffLimit+1 failed Pods.
			if job.Spec.BackoffLimit == nil {
				t.Fatalf("Job %s has no backoffLimit (the default is 6 retries); the documentation says %d tries", name, tries)
			}
			if got := int(*job.Spec.BackoffLimit); got+1 != tries {
				t.Errorf("Job %s: backoffLimit %d, %d tries; the documentation says %d tries", name, got, got+1, tries)
			}
		})
	}
}
