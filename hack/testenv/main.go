// Command kube-testenv runs a real etcd and a real kube-apiserver in one process on 127.0.0.1, for
// oz's integration tests and local runs. It also bundles kubectl, so scripts work where none is
// installed:
//
//	kube-testenv run --work-dir DIR [--user NAME:G1,G2]... [--controllers all|gc,namespace,...] [--nodes N --kwok-dir DIR] [--port N] [--webhook-client-cert] [-- APISERVER-FLAGS]
//	kube-testenv kubectl ARGS...
//
// `run` writes DIR/ready.json once /readyz answers ok. It stops on SIGTERM or SIGINT and, with
// --exit-on-stdin-eof, when its standard input closes, so a killed parent leaves nothing behind.
//
// Restarting: a second `run` on the work dir of a stopped one (started without
// --remove-work-dir-on-exit) reuses its certificates, keys and etcd data; with --port set to
// the port it had, clients and kubeconfigs of the first run reconnect to the second.
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	// Invoked through a symlink or copy named kubectl: behave as kubectl.
	if filepath.Base(os.Args[0]) == "kubectl" {
		os.Exit(runKubectl(os.Args[1:]))
	}
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "run":
		if err := run(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "kube-testenv: %v\n", err)
			os.Exit(1)
		}
	case "kubectl":
		os.Exit(runKubectl(os.Args[2:]))
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kube-testenv run --work-dir DIR [--user NAME:GROUPS]... [--controllers all|LIST] [--nodes N --kwok-dir DIR] [--port N] [--webhook-client-cert] [--exit-on-stdin-eof] [-- APISERVER-FLAGS]")
	fmt.Fprintln(os.Stderr, "       kube-testenv kubectl ARGS...")
	os.Exit(2)
}
