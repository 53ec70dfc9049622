package main

import (
	"os"
	"syscall"
)

// redirectLogs points this process's stdout and stderr at the log file, so every component's
// output (klog, etcd's zap logger, a panic trace) lands in DIR/logs/testenv.log and the parent
// never blocks on a pipe it does not drain.
func redirectLogs(file *os.File) {
	_ = syscall.Dup2(int(file.Fd()), 1)
	_ = syscall.Dup2(int(file.Fd()), 2)
}
