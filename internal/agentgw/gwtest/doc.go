// Package gwtest is test support for code that talks to the native OpenClaw
// gateway: it is imported only from _test.go files.
//
//   - StartGateway and Shared run the real gateway (openclaw 2026.9.6 on
//     Node 24, from scripts/install-runtime.sh or OCC_OPENCLAW_RUNTIME) on a
//     free loopback port with a private home, state, config and log, in
//     token mode or in the Kubernetes-shaped trusted-proxy mode. Without
//     the runtime the test is skipped, or failed under CI=true. One gateway
//     needs about 1 GB of memory and 10-15 s to start, so a package shares
//     one per mode through Shared and stops them from TestMain.
//   - FakeGateway is a scripted in-process gateway for the faults the real
//     one cannot be made to produce: a connection dropped after the set
//     frame, answered errors, answers slower than any deadline, mismatched
//     or malformed acknowledgements, a hello without the needed scope. It
//     counts the frames it receives.
//   - Proxy plays the Envoy route of the routed transport: TLS from an
//     in-memory CA, x-api-key check and strip (the key can be rotated at
//     run time), x-occ-identity overwrite, forwarding-header removal,
//     x-real-ip, path rewrite to / and the WebSocket upgrade to the
//     gateway.
//   - GuardedDir makes a directory whose processes die with the test binary
//     however it ends (timeout panic, SIGKILL): a guard process, a copy of
//     the test binary, kills everything still running under it once the
//     binary is gone. Every gateway directory of this package is one, and
//     tests that run gateways some other way (the local Compute driver)
//     put their data directories under one. RunKilledChild, ReportChild and
//     CheckSwept prove it for a package's own processes.
//   - DialNative is a bare protocol client for what the real client never
//     sends (spoofed headers) and as the benchmark baseline.
package gwtest
