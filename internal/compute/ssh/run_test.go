package ssh

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunOutputLimit: against the real sshd, without gateways. A remote
// command (the workspace setup runner among them) may print 64 KiB on
// each of its standard output and standard error, as the reference's
// maxBuffer allows per stream, and its whole standard output comes back;
// one byte more on either fails the command although it exited 0. A
// command that exits non-zero reports its status, with the first 4,096
// bytes of its standard error, however much it printed.
func TestRunOutputLimit(t *testing.T) {
	d, err := New(Options{Config: testConfig(t), Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	const kib64 = 64 << 10
	const tooMuch = "ssh: host h1: print printed more than 65536 bytes"
	// result is what run returned: the length of its output, or its error
	// (a remote status with the length of the standard error kept).
	type result struct {
		Stdout         int
		Err            string
		Status, Stderr int
	}
	tests := []struct {
		name                   string
		stdout, stderr, status int // what the command prints, and its exit status
		want                   result
	}{
		{name: "64 KiB on standard output", stdout: kib64, want: result{Stdout: kib64}},
		{name: "64 KiB + 1 on standard output", stdout: kib64 + 1, want: result{Err: tooMuch}},
		{name: "64 KiB on standard error", stderr: kib64, want: result{}},
		{name: "64 KiB + 1 on standard error", stderr: kib64 + 1, want: result{Err: tooMuch}},
		{name: "64 KiB on each", stdout: kib64, stderr: kib64, want: result{Stdout: kib64}},
		{name: "exit 3 after 64 KiB + 1 on each", stdout: kib64 + 1, stderr: kib64 + 1, status: 3, want: result{Status: 3, Stderr: 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := h.run(ctx, "print", shellCmd(`head -c "$1" /dev/zero && head -c "$2" /dev/zero | tr '\0' e >&2 && exit "$3"`,
				strconv.Itoa(tt.stdout), strconv.Itoa(tt.stderr), strconv.Itoa(tt.status)), nil)
			var got result
			var re *remoteError
			switch {
			case errors.As(err, &re):
				got.Status, got.Stderr = re.Status, len(re.Stderr)
			case err != nil:
				got.Err = err.Error()
			default:
				got.Stdout = len(out)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
		})
	}
}
