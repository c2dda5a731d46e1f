//go:build !unix

package server

// openFileLimit: a system without RLIMIT_NOFILE counts as allowing
// fallbackOpenFiles descriptors.
func openFileLimit() uint64 { return fallbackOpenFiles }
