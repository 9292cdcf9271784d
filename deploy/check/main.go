// Command check verifies newsflow's deployment files against the real types they are for.
//
//	check manifests FILE   decodes every object of a multi-document YAML file (what `helm
//	                       template` renders) strictly into its Kubernetes API type: an unknown
//	                       or misspelt field, a duplicate field, a wrong type or an unknown kind
//	                       is an error. Prints one JSON line per container of every workload
//	                       (kind, name, container, env, ports, probes, seccomp) and per
//	                       ConfigMap (its data) for the shell test's checks
//	                       (tests/integration/test_deploy_manifests.sh).
//	check seccomp-gen      writes deploy/seccomp/newsflow.json to stdout: the container
//	                       runtimes' default profile (moby's, which containerd and CRI-O
//	                       follow) plus io_uring_setup, io_uring_enter and io_uring_register.
//	check seccomp FILE     fails unless FILE is exactly what seccomp-gen writes, and the
//	                       default profile alone does not allow io_uring (else the extra rule
//	                       would be pointless).
//	check seccomp-default  writes the default profile alone (what a pod with RuntimeDefault
//	                       gets), for the test that the job says why it cannot start under it.
//
// Exit: 0 ok, 1 a check failed (the message says which object and why), 2 usage.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/moby/profiles/seccomp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: check manifests FILE | seccomp-gen | seccomp FILE | seccomp-default")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch {
	case os.Args[1] == "manifests" && len(os.Args) == 3:
		err = manifests(os.Args[2])
	case os.Args[1] == "seccomp-gen" && len(os.Args) == 2:
		var b []byte
		if b, err = profile(); err == nil {
			_, err = os.Stdout.Write(b)
		}
	case os.Args[1] == "seccomp" && len(os.Args) == 3:
		err = checkSeccomp(os.Args[2])
	case os.Args[1] == "seccomp-default" && len(os.Args) == 2:
		var b []byte
		if b, err = json.MarshalIndent(seccomp.DefaultProfile(), "", "\t"); err == nil {
			_, err = os.Stdout.Write(append(b, '\n'))
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "check:", err)
		os.Exit(1)
	}
}

// ---------------------------------------------------------------- manifests

// The kinds newsflow's manifests may hold, each decoded into its own type.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, nil
	case "batch/v1/Job":
		return &batchv1.Job{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, nil
	}
	return nil, fmt.Errorf("unknown kind %s %s (not one newsflow's manifests use)", apiVersion, kind)
}

type containerLine struct {
	Kind      string            `json:"kind"`
	Name      string            `json:"name"`
	Container string            `json:"container"`
	Args      []string          `json:"args"`
	Env       map[string]string `json:"env"` // value, "fieldRef:PATH" or "secretKeyRef:NAME/KEY"
	Ports     map[string]int32  `json:"ports"`
	Probes    map[string]string `json:"probes"` // kind -> "PATH@PORTNAME"
	Seccomp   string            `json:"seccomp"`
	Replicas  int32             `json:"replicas"`
}

func manifests(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rd := k8syaml.NewYAMLReader(bufio.NewReader(f))
	enc := json.NewEncoder(os.Stdout)
	n := 0
	for i := 0; ; i++ {
		d, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(d, &doc); err != nil {
			return fmt.Errorf("%s: object %d: %v", path, i+1, err)
		}
		if len(doc) == 0 {
			continue // an empty document (comments only)
		}
		n++
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(d, &head); err != nil {
			return fmt.Errorf("%s: object %d: %v", path, i+1, err)
		}
		obj, err := newObject(head.APIVersion, head.Kind)
		if err != nil {
			return fmt.Errorf("%s: object %d (%s): %v", path, i+1, head.Metadata.Name, err)
		}
		if err := yaml.UnmarshalStrict(d, obj); err != nil {
			return fmt.Errorf("%s: %s %s: %v", path, head.Kind, head.Metadata.Name, err)
		}
		for _, l := range containersOf(obj) {
			if err := enc.Encode(l); err != nil {
				return err
			}
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			line := map[string]any{"kind": "ConfigMap", "name": cm.Name, "data": cm.Data}
			if err := enc.Encode(line); err != nil {
				return err
			}
		}
	}
	if n == 0 {
		return errors.New(path + ": no objects")
	}
	return nil
}

func containersOf(obj any) []containerLine {
	var spec *corev1.PodSpec
	var kind, name string
	var replicas int32 = 1
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		spec, kind, name = &o.Spec.Template.Spec, "StatefulSet", o.Name
		if o.Spec.Replicas != nil {
			replicas = *o.Spec.Replicas
		}
	case *appsv1.Deployment:
		spec, kind, name = &o.Spec.Template.Spec, "Deployment", o.Name
		if o.Spec.Replicas != nil {
			replicas = *o.Spec.Replicas
		}
	case *batchv1.Job:
		spec, kind, name = &o.Spec.Template.Spec, "Job", o.Name
	default:
		return nil
	}
	seccomp := ""
	if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		seccomp = string(sc.SeccompProfile.Type)
		if sc.SeccompProfile.LocalhostProfile != nil {
			seccomp += ":" + *sc.SeccompProfile.LocalhostProfile
		}
	}
	var out []containerLine
	for _, c := range spec.Containers {
		l := containerLine{Kind: kind, Name: name, Container: c.Name, Args: c.Args,
			Env: map[string]string{}, Ports: map[string]int32{}, Probes: map[string]string{},
			Seccomp: seccomp, Replicas: replicas}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				l.Env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
			} else if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				l.Env[e.Name] = "secretKeyRef:" + e.ValueFrom.SecretKeyRef.Name + "/" +
					e.ValueFrom.SecretKeyRef.Key
			} else {
				l.Env[e.Name] = e.Value
			}
		}
		for _, p := range c.Ports {
			l.Ports[p.Name] = p.ContainerPort
		}
		for k, p := range map[string]*corev1.Probe{"startup": c.StartupProbe,
			"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
			if p != nil && p.HTTPGet != nil {
				l.Probes[k] = p.HTTPGet.Path + "@" + p.HTTPGet.Port.String()
			}
		}
		out = append(out, l)
	}
	return out
}

// ---------------------------------------------------------------- seccomp

var ioURing = []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}

func allows(p *seccomp.Seccomp, name string) bool {
	for _, s := range p.Syscalls {
		if s.Action != "SCMP_ACT_ALLOW" {
			continue
		}
		for _, n := range s.Names {
			if n == name {
				return true
			}
		}
	}
	return false
}

func profile() ([]byte, error) {
	p := seccomp.DefaultProfile()
	for _, n := range ioURing {
		if allows(p, n) {
			return nil, fmt.Errorf("the default profile allows %s already: newsflow needs no "+
				"profile of its own", n)
		}
	}
	rule := &seccomp.Syscall{Comment: "newsflow: every shard is an io_uring event loop"}
	rule.Names = ioURing
	rule.Action = "SCMP_ACT_ALLOW"
	p.Syscalls = append(p.Syscalls, rule)
	b, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func checkSeccomp(path string) error {
	have, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	want, err := profile()
	if err != nil {
		return err
	}
	if !bytes.Equal(have, want) {
		return fmt.Errorf("%s is not the default profile plus io_uring (regenerate it: "+
			"go run ./deploy/check seccomp-gen > %s)", path, path)
	}
	var p seccomp.Seccomp
	if err := json.Unmarshal(have, &p); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	for _, n := range ioURing {
		if !allows(&p, n) {
			return fmt.Errorf("%s does not allow %s", path, n)
		}
	}
	return nil
}
