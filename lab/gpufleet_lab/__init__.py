"""The gpufleet lab: a small bare-metal GPU cell on one machine, to rehearse upgrades against.

Real parts: etcd, kube-apiserver (one per control-plane host, so an upgrade passes through a mixed-version HA
control plane), kube-controller-manager, kube-scheduler (built from their Go modules), KWOK for the Node objects,
podman containers as the hosts, real apt/dpkg inside them. Simulated parts, labelled as such: the GPU tools, kubeadm,
the kubelet and the Kueue/training-job reactions (``lab/simulators`` and :mod:`gpufleet_lab.controller`). None of
this is imported by the collection's product code.
"""
