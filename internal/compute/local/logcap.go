package local

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/openclaw/occ/internal/compute/agentdir"
)

// capLog keeps gateway.log and gateway.log.1 together under max bytes.
// The gateway appends to gateway.log through its own O_APPEND descriptor
// (it must outlive occ, so its output cannot go through a pipe of ours);
// when the file passes max/2, its last max/2 bytes move to gateway.log.1
// and it is truncated in place, after which the gateway's next write lands
// at offset 0. Lines written between the copy and the truncation are
// lost, and the file may exceed max/2 by what is written between two
// checks (every 250 ms while starting, 5 s after). Errors are ignored: the
// cap is best effort and must never stop a gateway.
func capLog(path string, max int64) {
	half := max / 2
	fi, err := os.Stat(path)
	if err != nil || fi.Size() <= half {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	size := fi.Size()
	keep := min(size, half)
	buf := make([]byte, keep)
	if _, err := f.ReadAt(buf, size-keep); err != nil && err != io.EOF {
		return
	}
	// Start the archive at a line boundary when there is one.
	if i := bytes.IndexByte(buf, '\n'); i >= 0 && i+1 < len(buf) && keep < size {
		buf = buf[i+1:]
	}
	if err := agentdir.WriteFileAtomic(path+".1", buf, 0o600); err != nil {
		return
	}
	_ = os.Truncate(path, 0)
}

// lineLogger turns the setup runner's log lines (step names and error
// classes, never content) into slog records.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func newLineLogger(l *slog.Logger) *lineLogger { return &lineLogger{log: l} }

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		if line := bytes.TrimSpace(w.buf[:i]); len(line) > 0 {
			w.log.Info("local: workspace setup", "line", string(line))
		}
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 { // a runaway line: log what we have
		w.log.Info("local: workspace setup", "line", string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}
