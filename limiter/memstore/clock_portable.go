//go:build !(linux && amd64)

package memstore

import "time"

// wallMicros reads the wall clock in µs, the store's unit.
func wallMicros() int64 { return time.Now().UnixMicro() }
