package main

import (
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

// runKubectl runs the real kubectl of the same Kubernetes version as the apiserver.
func runKubectl(args []string) int {
	command := kubectlcmd.NewDefaultKubectlCommand()
	command.SetArgs(args)
	if err := cli.RunNoErrOutput(command); err != nil {
		// CheckErr prints kubectl's usual message and exits with kubectl's exit code.
		util.CheckErr(err)
	}
	return 0
}
