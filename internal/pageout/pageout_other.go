//go:build !linux

package pageout

import "errors"

// Executable does nothing outside Linux: there is no MADV_PAGEOUT.
func Executable() (Result, error) { return Result{}, errors.ErrUnsupported }
