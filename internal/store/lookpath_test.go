package store_test

import "os/exec"

func execLookPath() (string, error) { return exec.LookPath("redis-server") }
