package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// installedMode is the mode of an installed copy: executable by everyone,
// writable by nobody, so the container that runs it cannot change it.
const installedMode = 0o555

func newInstallSelfCmd(d deps) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:     "install-self --to PATH",
		Example: `  occ install-self --to /opt/occ/bin/occ`,
		Short:   "Copy this occ binary to PATH, atomically",
		Long: `Copy the running occ binary to PATH, atomically: a temporary file in
PATH's directory is written, synced, made mode 0555 and renamed over PATH.
PATH's directory must exist.

The Kubernetes driver's gateway Pods use it: an init container in the OCC
image copies occ into a volume shared with the gateway image, which runs
"occ workspace-setup" from there. It needs no shell and no cp in either
image. On failure PATH is left as it was (absent, or its old content).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if to == "" {
				return usageError(errors.New("install-self: --to is required"))
			}
			src, err := d.executable()
			if err != nil {
				return runtimeError(fmt.Errorf("install-self: locating the running binary: %w", err))
			}
			if err := installSelf(src, to); err != nil {
				return runtimeError(fmt.Errorf("install-self: %w", err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "where to put the copy (its directory must exist)")
	return cmd
}

// installSelf copies the regular file src to dst through a temporary file
// in dst's directory, so a reader of dst sees either nothing (or the old
// file) or the complete copy, never a partial one: an init container that
// is killed and restarted half way cannot leave a truncated binary that
// the next container would execute. The temporary file is removed on any
// failure.
func installSelf(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}

	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, in); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, tmp.Name(), err)
	}
	if err := tmp.Chmod(installedMode); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable. File systems that cannot sync a
// directory (EINVAL, ENOTSUP) are accepted: the rename itself is done.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
