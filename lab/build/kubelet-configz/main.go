// kubelet-configz prints what a kubelet of this release serves at /configz when it runs the given config file:
// the file read by the kubelet's own loader (its defaults), the eviction defaults the kubelet adds, the kubelet's
// own validation, and its conversion to the versioned KubeletConfiguration under the "kubeletconfig" key
// (cmd/kubelet/app/server.go loadConfigFile, setConfigz; k8s.io/component-base/configz). The lab has no kubelet
// (no container runtime), so its simulated kubelets serve this (lab/gpufleet_lab/kubelets.py). Nothing here is
// written by hand beyond calling those functions in the kubelet's order; command-line flags are not applied.
//
//	kubelet-configz /var/lib/kubelet/config.yaml   -> {"kubeletconfig":{"kind":"KubeletConfiguration",...}}
//
// Exit 1 with the kubelet's own words when the kubelet would refuse the file.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletconfigvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
)

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: kubelet-configz CONFIG_FILE")
	}
	const errFmt = "failed to load Kubelet config file %s, error %v"
	name, err := filepath.Abs(os.Args[1])
	if err != nil {
		fail(errFmt, os.Args[1], err)
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, name)
	if err != nil {
		fail(errFmt, name, err)
	}
	kc, err := loader.Load(context.Background())
	if err != nil {
		fail(errFmt, name, err)
	}
	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard {
			if _, exists := kc.EvictionHard[k]; !exists {
				kc.EvictionHard[k] = v
			}
		}
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kc.FeatureGates); err != nil {
		fail("failed to set feature gates from initial flags-based config: %v", err)
	}
	if err := kubeletconfigvalidation.ValidateKubeletConfiguration(kc, utilfeature.DefaultFeatureGate); err != nil {
		fail("failed to validate kubelet configuration, error: %v, path: %s", err, name)
	}
	scheme, _, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		fail("kubelet scheme: %v", err)
	}
	versioned := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := scheme.Convert(kc, versioned, nil); err != nil {
		fail("convert to v1beta1: %v", err)
	}
	versioned.GetObjectKind().SetGroupVersionKind(kubeletconfigv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration"))
	out, err := json.Marshal(map[string]interface{}{"kubeletconfig": versioned})
	if err != nil {
		fail("error marshaling json: %v", err)
	}
	os.Stdout.Write(out)
}
