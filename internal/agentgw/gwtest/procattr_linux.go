package gwtest

import "syscall"

// gatewayProcAttr puts the gateway in its own process group, so the
// helpers it spawns (spawn broker, sqlite worker) can be found and stopped
// with it, and ties it to the test binary: if that dies (panic, go test
// -timeout) the gateway dies too instead of holding 1 GB. Pdeathsig fires
// when the creating *thread* exits, which is why launch starts the process
// from a locked thread that lives exactly as long as the child.
func gatewayProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
