package pageout

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Result is what Executable did.
type Result struct {
	// Advised is the size in bytes of the read-only mappings of the
	// executable that were advised.
	Advised int64
	// Before and After are the process's resident bytes backed by files
	// (RssFile in /proc/self/status) just before and just after.
	Before, After int64
}

// span is one mapping of /proc/self/maps: [start, end).
type span struct{ start, end uintptr }

// executableSpans returns the read-only mappings of the file that holds
// address pc, given the text of /proc/self/maps. The file is recognised
// by its device and inode, not its path: a path can be renamed or
// replaced while the process runs ("(deleted)"), the inode it mapped
// cannot. Writable mappings are left out: they hold the binary's
// initialised variables, which are the process's own memory once written.
func executableSpans(maps []byte, pc uintptr) ([]span, error) {
	type mapping struct {
		span
		perms, dev, inode string
	}
	var all []mapping
	for line := range bytes.Lines(maps) {
		// start-end perms offset dev inode [path]
		f := bytes.Fields(line)
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			return nil, fmt.Errorf("pageout: malformed mapping %q", f[0])
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("pageout: malformed mapping %q", f[0])
		}
		all = append(all, mapping{span{uintptr(start), uintptr(end)}, string(f[1]), string(f[3]), string(f[4])})
	}
	var dev, inode string
	for _, m := range all {
		if m.start <= pc && pc < m.end {
			dev, inode = m.dev, m.inode
			break
		}
	}
	if inode == "" {
		return nil, errors.New("pageout: no mapping holds the executable's code")
	}
	if inode == "0" {
		return nil, errors.New("pageout: the executable's code is not in a file mapping")
	}
	var out []span
	for _, m := range all {
		if m.dev == dev && m.inode == inode && len(m.perms) > 1 && m.perms[1] != 'w' {
			out = append(out, m.span)
		}
	}
	return out, nil
}

// rssFile returns RssFile, in bytes, from the text of /proc/self/status.
func rssFile(status []byte) (int64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("RssFile:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			break
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 {
			break
		}
		return kb << 10, nil
	}
	return 0, errors.New("pageout: no RssFile in /proc/self/status")
}
