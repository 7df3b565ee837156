package pageout

import (
	"fmt"
	"io"
	"os"
	"reflect"

	"golang.org/x/sys/unix"
)

// procLimit bounds what is read from /proc/self/maps and status: a Go
// process has a few hundred mappings, tens of kilobytes of text.
const procLimit = 4 << 20

// Executable advises the kernel to page out the read-only mappings of the
// running executable (MADV_PAGEOUT, Linux 5.4 and later). The pages the
// process still needs come back on their next use. An error means nothing
// or only part was advised; the process is unaffected either way, so
// callers log it and go on.
func Executable() (Result, error) {
	maps, err := readProc("/proc/self/maps")
	if err != nil {
		return Result{}, err
	}
	spans, err := executableSpans(maps, reflect.ValueOf(Executable).Pointer())
	if err != nil {
		return Result{}, err
	}
	var r Result
	if r.Before, err = statusRSSFile(); err != nil {
		return r, err
	}
	for _, s := range spans {
		// Raw addresses, not a []byte over them: these are not Go memory.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_PAGEOUT); errno != 0 {
			return r, fmt.Errorf("pageout: madvise(MADV_PAGEOUT) %#x-%#x: %w", s.start, s.end, errno)
		}
		r.Advised += int64(s.end - s.start)
	}
	r.After, err = statusRSSFile()
	return r, err
}

func statusRSSFile() (int64, error) {
	b, err := readProc("/proc/self/status")
	if err != nil {
		return 0, err
	}
	return rssFile(b)
}

func readProc(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pageout: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, procLimit+1))
	if err != nil {
		return nil, fmt.Errorf("pageout: read %s: %w", path, err)
	}
	if len(b) > procLimit {
		return nil, fmt.Errorf("pageout: %s is larger than %d bytes", path, procLimit)
	}
	return b, nil
}
