package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// installCommand is the command that installs redis-server on Debian and Ubuntu.
const installCommand = "apt-get install -y redis-server"

// ErrNotFound is returned (wrapped) by [Find] when redis-server is not in PATH.
var ErrNotFound = errors.New("redis-server not found")

// Find returns the path of the redis-server binary found in PATH. When there is
// none it returns an error wrapping [ErrNotFound] whose text contains the
// install command "apt-get install -y redis-server", prefixed with "sudo" when
// the current user is not root.
func Find() (string, error) {
	return findIn(os.Getenv("PATH"), os.Geteuid() == 0)
}

// findIn looks for an executable redis-server in the directories of the
// PATH-style list pathList. root selects the wording of the install hint.
func findIn(pathList string, root bool) (string, error) {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			continue // an empty entry means "."; never pick up a binary from the working directory
		}
		p := filepath.Join(dir, "redis-server")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	cmd := installCommand
	if !root {
		cmd = "sudo " + cmd
	}
	return "", fmt.Errorf("%w in PATH; install it with: %s", ErrNotFound, cmd)
}
