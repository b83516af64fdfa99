// Command kube-plane is a real Kubernetes control plane for the collection's tests: the
// kube-apiserver, kube-controller-manager and kube-scheduler of one pinned release (go.mod), in
// one binary that dispatches on its first argument as hyperkube did, so the packages the three
// share compile and link once.
//
//	kube-plane apiserver --etcd-servers=... [kube-apiserver flags]
//	kube-plane controller-manager --kubeconfig=... [kube-controller-manager flags]
//	kube-plane scheduler --kubeconfig=... [kube-scheduler flags]
//
// tests/sim/cks_sim/real_kube/plane.py starts and stops it; `make kube-plane` builds it with the
// release's version stamped in (-ldflags -X k8s.io/component-base/version...), so /version and
// `kubectl version` name the release instead of v0.0.0-master.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

const usage = "usage: kube-plane apiserver|controller-manager|scheduler [flags]"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var cmd *cobra.Command
	switch os.Args[1] {
	case "apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "controller-manager":
		cmd = controllermanager.NewControllerManagerCommand()
	case "scheduler":
		cmd = scheduler.NewSchedulerCommand()
	default:
		fmt.Fprintf(os.Stderr, "kube-plane: unknown component %q\n%s\n", os.Args[1], usage)
		os.Exit(2)
	}
	// The component sees its own flags only, as if it were its own binary.
	cmd.SetArgs(os.Args[2:])
	os.Exit(cli.Run(cmd))
}
