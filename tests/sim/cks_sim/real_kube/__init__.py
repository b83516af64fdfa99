"""cks-sim's Kubernetes half on a real control plane (``cks-sim serve --kube real``): ``plane`` starts
kube-apiserver, kube-controller-manager and kube-scheduler (tests/kube-plane); ``actors`` play the
kubelets and the cloud's part against its API; ``world`` is what the CloudStack half and the admin
API talk to, the same small interface as cks-sim's own ``KubeWorld`` offers them."""
