// Package config owns the configuration of an occ process: the Config
// struct, where each value comes from, and Validate.
//
// Every option has exactly one command-line flag, one OCC_* environment
// variable and one key in the YAML file, listed in one table (options in
// load.go) that registers the flags, reads the environment and is checked
// against docs/configuration.md by a test, so the three spellings cannot
// drift apart. Precedence, highest first: flag, environment, config file
// (--config / OCC_CONFIG), built-in default.
//
// The config file is strict on purpose: an unknown key at any depth, a
// repeated key or a second YAML document is an error, because a silently
// ignored typo in a control plane's config (say "trustedProxy:" for
// "trustedProxies:") fails open in ways nobody notices until it matters.
//
// Secrets are never configuration values: the bootstrap admin password is
// read from a file whose path is configured. The one value that may embed a
// secret, the database URL, is never echoed in an error message and is
// redacted when a Config is logged.
package config
