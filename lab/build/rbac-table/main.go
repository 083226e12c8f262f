// Prints, as JSON, the RBAC objects that kubeadm's own upgrade phases create, by running those phases' functions
// against a fake clientset of the same Kubernetes release (lab/build/rbac-table.sh builds it per minor). Nothing
// here is written by hand: each object is what kubeadm's code sent to the API.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	applyphases "k8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/upgrade/apply"
	dnsaddon "k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/dns"
	proxyaddon "k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/proxy"
	kubeletphase "k8s.io/kubernetes/cmd/kubeadm/app/phases/kubelet"
	kubeconfigphase "k8s.io/kubernetes/cmd/kubeadm/app/phases/kubeconfig"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/uploadconfig"
	configutil "k8s.io/kubernetes/cmd/kubeadm/app/util/config"
)

type object struct {
	Phase string      `json:"phase"`
	Kind  string      `json:"kind"`
	Body  interface{} `json:"object"`
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "rbac-table: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func record(phase string, client clientset.Interface, out *[]object) {
	ctx := context.Background()
	crs, err := client.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	must(err, "list ClusterRoles")
	for i := range crs.Items {
		*out = append(*out, object{phase, "ClusterRole", clean(&crs.Items[i].ObjectMeta, crs.Items[i])})
	}
	crbs, err := client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	must(err, "list ClusterRoleBindings")
	for i := range crbs.Items {
		*out = append(*out, object{phase, "ClusterRoleBinding", clean(&crbs.Items[i].ObjectMeta, crbs.Items[i])})
	}
	roles, err := client.RbacV1().Roles("").List(ctx, metav1.ListOptions{})
	must(err, "list Roles")
	for i := range roles.Items {
		*out = append(*out, object{phase, "Role", clean(&roles.Items[i].ObjectMeta, roles.Items[i])})
	}
	rbs, err := client.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	must(err, "list RoleBindings")
	for i := range rbs.Items {
		*out = append(*out, object{phase, "RoleBinding", clean(&rbs.Items[i].ObjectMeta, rbs.Items[i])})
	}
}

// clean keeps what identifies the object (name, namespace, labels); the fake client adds nothing else.
func clean(meta *metav1.ObjectMeta, obj interface{}) interface{} {
	meta.ResourceVersion, meta.ManagedFields = "", nil
	return obj
}

// call runs fn with the given leading arguments, then the zero value of each further parameter but an io.Writer
// (io.Discard): a phase function whose signature gained a parameter between minors is still called as kubeadm does
// with no patches and no printed manifest.
func call(fn interface{}, lead ...interface{}) error {
	f := reflect.ValueOf(fn)
	args := make([]reflect.Value, f.Type().NumIn())
	for i := range args {
		t := f.Type().In(i)
		switch {
		case i < len(lead):
			args[i] = reflect.ValueOf(lead[i])
		case t == reflect.TypeOf((*io.Writer)(nil)).Elem():
			args[i] = reflect.ValueOf(io.Discard)
		default:
			args[i] = reflect.Zero(t)
		}
	}
	out := f.Call(args)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return err
	}
	return nil
}

// upgradeData is what the bootstrap-token phase of `kubeadm upgrade apply` asks of its run: a client, and that it is
// not a dry run. Any other method of the phase's Data would panic here; the phase calls none.
type upgradeData struct {
	applyphases.Data
	client clientset.Interface
}

func (d upgradeData) Client() clientset.Interface { return d.client }
func (d upgradeData) DryRun() bool                { return false }

func main() {
	stdout := os.Stdout
	os.Stdout = os.Stderr // kubeadm's phases print their progress with fmt.Println: keep it out of the JSON
	cfg, err := configutil.DefaultedStaticInitConfiguration()
	must(err, "kubeadm's default configuration")
	var out []object
	phases := []struct {
		name string
		run  func(clientset.Interface) error
	}{
		{"bootstrap-token", func(c clientset.Interface) error {
			// the phase itself, as `kubeadm upgrade apply` runs it: what it creates changes between minors (1.36
			// added the apiserver's kubelet client binding, kubeadm:apiserver-kubelet-client)
			return applyphases.NewBootstrapTokenPhase().Run(upgradeData{client: c})
		}},
		{"upload-config kubeadm", func(c clientset.Interface) error { return uploadconfig.UploadConfiguration(cfg, c) }},
		{"upload-config kubelet", func(c clientset.Interface) error {
			return kubeletphase.CreateConfigMap(&cfg.ClusterConfiguration, c)
		}},
		{"addon coredns", func(c clientset.Interface) error {
			return dnsaddon.EnsureDNSAddon(&cfg.ClusterConfiguration, c, "", io.Discard, false)
		}},
		{"addon kube-proxy", func(c clientset.Interface) error {
			// 1.37 added a patches directory before the writer: call it with what its own signature asks
			return call(proxyaddon.EnsureProxyAddon, &cfg.ClusterConfiguration, &cfg.LocalAPIEndpoint, c)
		}},
		{"init kubeconfig (kubeadm:cluster-admins)", func(c clientset.Interface) error {
			_, err := kubeconfigphase.EnsureAdminClusterRoleBindingImpl(context.Background(), c, nil,
				10*time.Millisecond, time.Second)
			return err
		}},
	}
	for _, phase := range phases {
		client := fake.NewSimpleClientset()
		must(phase.run(client), phase.name)
		record(phase.name, client, &out)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", " ")
	must(enc.Encode(out), "encode")
}
