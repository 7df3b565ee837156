package pageout

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// maps is /proc/self/maps of an occ server, shortened: the executable's
// three mappings (code, read-only data, data), the heap, libc, and an
// anonymous mapping.
const maps = `00400000-01e9f000 r-xp 00000000 fe:00 1234567                            /work/main/bin/occ (deleted)
01e9f000-03ad9000 r--p 01a9f000 fe:00 1234567                            /work/main/bin/occ (deleted)
03ad9000-03bb3000 rw-p 036d9000 fe:00 1234567                            /work/main/bin/occ (deleted)
03bb3000-03c00000 rw-p 00000000 00:00 0
3cf0c6000000-3cf0ce800000 rw-p 00000000 00:00 0
7fbbf6344000-7fbbf649a000 r-xp 00028000 fe:00 7654321                    /usr/lib/x86_64-linux-gnu/libc.so.6
7fbbf649a000-7fbbf64ef000 r--p 0017e000 fe:00 7654321                    /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c5f1000-7ffd1c612000 rw-p 00000000 00:00 0                          [stack]
`

func TestExecutableSpans(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maps    string
		pc      uintptr
		want    []span
		wantErr string
	}{
		{name: "code and read-only data of the executable, by inode, even deleted",
			maps: maps, pc: 0x00401000,
			want: []span{{0x00400000, 0x01e9f000}, {0x01e9f000, 0x03ad9000}}},
		{name: "first byte of the mapping", maps: maps, pc: 0x00400000,
			want: []span{{0x00400000, 0x01e9f000}, {0x01e9f000, 0x03ad9000}}},
		{name: "another file's mappings when the code is there", maps: maps, pc: 0x7fbbf6344100,
			want: []span{{0x7fbbf6344000, 0x7fbbf649a000}, {0x7fbbf649a000, 0x7fbbf64ef000}}},
		{name: "end is exclusive", maps: maps, pc: 0x03bb3000, wantErr: "not in a file mapping"},
		{name: "anonymous memory", maps: maps, pc: 0x3cf0c6000010, wantErr: "not in a file mapping"},
		{name: "no mapping", maps: maps, pc: 0x10, wantErr: "no mapping holds"},
		{name: "empty", maps: "", pc: 0x00401000, wantErr: "no mapping holds"},
		{name: "malformed range", maps: "00400000 r-xp 00000000 fe:00 1 /occ\n", pc: 0x00401000, wantErr: "malformed mapping"},
		{name: "not hexadecimal", maps: "0040000g-01e9f000 r-xp 00000000 fe:00 1 /occ\n", pc: 0x00401000, wantErr: "malformed mapping"},
		{name: "end before start", maps: "01e9f000-00400000 r-xp 00000000 fe:00 1 /occ\n", pc: 0x00401000, wantErr: "malformed mapping"},
		{name: "short lines are skipped", maps: "garbage\n" + maps, pc: 0x00401000,
			want: []span{{0x00400000, 0x01e9f000}, {0x01e9f000, 0x03ad9000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := executableSpans([]byte(tc.maps), tc.pc)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(span{})); d != "" {
				t.Errorf("spans (-want +got):\n%s", d)
			}
		})
	}
}

func TestRSSFile(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int64
		wantErr      bool
	}{
		{name: "present", status: "Name:\tocc\nVmRSS:\t   54624 kB\nRssAnon:\t    8984 kB\nRssFile:\t   45640 kB\nRssShmem:\t       0 kB\n", want: 45640 << 10},
		{name: "zero", status: "RssFile:\t0 kB\n", want: 0},
		{name: "missing", status: "VmRSS:\t1 kB\n", wantErr: true},
		{name: "no unit", status: "RssFile:\t12\n", wantErr: true},
		{name: "other unit", status: "RssFile:\t12 MB\n", wantErr: true},
		{name: "not a number", status: "RssFile:\tx kB\n", wantErr: true},
		{name: "negative", status: "RssFile:\t-1 kB\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rssFile([]byte(tc.status))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("rssFile = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestExecutable pages out this test binary's code and read-only data
// and checks that its resident file pages went down, then that the
// process still runs code from those pages (they fault back in).
func TestExecutable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("MADV_PAGEOUT is Linux only") // the CI machines are Linux: this never skips there
	}
	r, err := Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("advised %d KiB; RssFile %d → %d KiB", r.Advised>>10, r.Before>>10, r.After>>10)
	if r.Advised <= 0 {
		t.Errorf("Advised = %d, want the executable's read-only mappings", r.Advised)
	}
	if r.Before <= 0 || r.After >= r.Before/2 {
		t.Errorf("RssFile %d → %d bytes: want it at least halved", r.Before, r.After)
	}
	again, err := Executable()
	if err != nil {
		t.Fatalf("second call, running from paged-out code: %v", err)
	}
	if again.Advised != r.Advised {
		t.Errorf("second call advised %d bytes, the first %d", again.Advised, r.Advised)
	}
}
