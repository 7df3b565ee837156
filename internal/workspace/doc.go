// Package workspace owns what OCC knows about an Agent's workspace files
// without talking to a runtime:
//
//   - the four file names (Names, ValidName) in their canonical order;
//   - the content rule shared by file reads, file writes and initial files
//     (CheckContent, ContentDetails): well-formed UTF-8, no U+0000, at most
//     MaxFileBytes UTF-8 bytes;
//   - the validation of the initial files submitted with an Agent create
//     (NormalizeInitialFiles, NormalizeInitialFilesJSON) and of the
//     defaults identity the create form was rendered with
//     (ValidateDefaultsID, CheckDefaultsID);
//   - the OpenClaw default documents embedded from the pinned release
//     (Version, Defaults) and their identity (DefaultsID, ComputeDefaultsID),
//     with the template rendering (Render) and the JSON.stringify-compatible
//     serializer (StringifyJS) that define that identity;
//   - the workspace setup (Setup), the one type Compute drivers deliver
//     and the setup runner applies, and its identity and marker
//     serialization (Identity, MarshalMarker, MarkerName), shared by OCC
//     and the setup runner.
//
// # Why JavaScript compatibility
//
// The defaults identity and the marker are defined by the reference system
// as strings produced by JavaScript's JSON.stringify, and markers written by
// an earlier runner must keep matching. Go's encoding/json escapes <, >, &,
// U+2028 and U+2029 and rewrites invalid UTF-8, so this package carries its
// own small serializer whose output is byte-for-byte what JSON.stringify
// writes for the same strings. Render likewise follows the reference
// runner's renderTemplate step by step, including Node's decoding of
// ill-formed UTF-8 and JavaScript's definition of whitespace.
//
// # Content never leaves
//
// Nothing here puts file content into errors, details or messages: a
// detail names only a JSON pointer and a code, and error texts are fixed.
package workspace
