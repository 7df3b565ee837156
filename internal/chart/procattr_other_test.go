//go:build unix && !linux

package chart

import "syscall"

// childProcAttr puts an occ child in its own process group. Without
// Pdeathsig (Linux only) a test binary that dies without its cleanups can
// leave the child running; the Kubernetes test environment is Linux-only.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
