// Package secretfile owns how OCC reads the small credential files it is
// pointed at and re-reads for every use: the gateway client's service key,
// gateway token and CA bundle, and the SSH driver's token reader on a remote
// host. Reading a file again for every operation makes a rotated key, token
// or CA bundle apply to the next operation without a restart; the rules
// below keep a misplaced path from costing more than one small read, and a
// secret from leaking through an error.
//
// Failure semantics: every reader fails closed. A path that is relative, not
// a regular file, swapped while it was opened, larger than its bound, or (for
// a secret) empty or holding a byte outside '!'..'~' is an error, and no
// bytes are returned. An error names the path and what is wrong with the
// file, never a byte of a secret. Nothing is trimmed or truncated. On
// platforms without O_NOFOLLOW and O_NONBLOCK every read fails rather than
// read a file unsafely. The package imports no OCC package.
package secretfile
