package chart

import "syscall"

// childProcAttr puts an occ child in its own process group (stopped as a
// group) and ties it to the test binary: if that dies (panic, go test
// -timeout) the child gets SIGKILL instead of serving on. Pdeathsig fires
// when the creating thread exits, which is why startOCC starts the child
// from a locked thread that lives as long as the child.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
