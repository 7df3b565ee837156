// Package pageout hands the kernel back the pages of OCC's own executable
// that only start-up needed, so that a long-running occ server or occ
// worker holds in memory the code and data it uses, not everything its
// packages' initialisers and the start-up path once touched.
//
// Why: the occ binary is about 80 MB, most of it the Kubernetes client's
// packages, whose initialisers run in every process. The kernel maps file
// pages in whole folios and fault-around windows, so after start-up 40-47
// MB of the binary were resident (docs/performance.md), against 9-12 MB
// of OCC's own memory. Those pages are clean copies of the file: the
// kernel could drop them under memory pressure anyway, but until then they
// count in the process's RSS and in a container's working set, which is
// what operators watch and what limits are set against.
//
// Executable advises MADV_PAGEOUT over the executable's read-only
// mappings. Pages the process still uses fault back in on their next use
// (from the page cache, or from disk when the kernel freed them), so the
// first request down a path not taken since start-up can take a little
// longer. It never changes what the process computes: the pages are
// read-only copies of the file. Linux only; elsewhere it reports
// errors.ErrUnsupported and does nothing.
package pageout
