// Package kubernetes holds the Kubernetes manifests of a simpleqd fleet
// (the YAML files beside this one). It has no code: its test renders the
// kustomization offline and checks every object against the Kubernetes API
// types, the project's own configuration loader and the Dockerfile, so a
// manifest that drifts from the daemon fails CI.
package kubernetes

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/simpleq/simpleqd/internal/cli"
	"github.com/simpleq/simpleqd/internal/config"
)

const (
	// containerName is the daemon's container in the Deployment.
	containerName = "simpleqd"
	// imageStage is the Dockerfile stage the Deployment runs.
	imageStage = "simpleqd"
	// httpShutdown bounds how long a stopping daemon waits for API requests
	// in progress (srv.Shutdown in daemon.Run). It runs alongside the
	// delivery drain, so a pod's drain takes max(shutdownGrace, httpShutdown).
	httpShutdown = 5 * time.Second
	// handBackMargin is what terminationGracePeriodSeconds must leave after
	// the preStop sleep and the drain: the hand-back of cancelled deliveries
	// (one settle script call per queue, normally milliseconds) and the exit.
	handBackMargin = 10 * time.Second
)

// TestManifests renders deploy/kubernetes and requires every check to pass.
func TestManifests(t *testing.T) {
	for _, p := range check(".", filepath.Join("..", "..", "Dockerfile")) {
		t.Error(p)
	}
}

// TestDriftIsCaught changes the manifests (or the Dockerfile) in a copy, one
// plausible mistake at a time, and requires check to report each: the test
// above would fail on such a drift.
func TestDriftIsCaught(t *testing.T) {
	type edit struct{ file, old, new string }
	cases := []struct {
		name  string
		edits []edit
		want  string // a problem that check must report contains this
	}{
		{"unknown field", []edit{{"deployment.yaml", "      terminationGracePeriodSeconds: 40", "      terminationGracePeriodSecond: 40"}}, `unknown field "spec.template.spec.terminationGracePeriodSecond"`},
		{"field in the wrong case", []edit{{"service.yaml", "  selector:", "  Selector:"}}, `unknown field "spec.Selector"`},
		{"duplicate field", []edit{{"poddisruptionbudget.yaml", "  maxUnavailable: 1", "  maxUnavailable: 1\n  maxUnavailable: 2"}}, `"maxUnavailable" already set`},
		{"bad quantity", []edit{{"deployment.yaml", "memory: 512Mi", "memory: 512MB"}}, "deployment.yaml"},
		{"unknown kind", []edit{{"service.yaml", "kind: Service", "kind: Ingress"}}, "no check knows v1 Ingress"},
		{"file left out of the kustomization", []edit{{"kustomization.yaml", "  - service.yaml\n", ""}}, "service.yaml is not listed"},
		{"missing resource", []edit{{"kustomization.yaml", "  - service.yaml", "  - services.yaml"}}, "services.yaml"},
		{"kustomize feature the renderer lacks", []edit{{"kustomization.yaml", "resources:", "namePrefix: prod-\nresources:"}}, `unknown field "namePrefix"`},
		{"one replica", []edit{{"deployment.yaml", "replicas: 2", "replicas: 1"}}, "replicas"},
		{"readiness on /healthz", []edit{{"deployment.yaml", "path: /readyz", "path: /healthz"}}, "readinessProbe"},
		{"liveness on /readyz", []edit{{"deployment.yaml", "path: /healthz", "path: /readyz"}}, "livenessProbe"},
		{"probe on another port", []edit{{"deployment.yaml", "              path: /readyz\n              port: http", "              path: /readyz\n              port: 9090"}}, "readinessProbe"},
		{"container port is not the listen port", []edit{{"deployment.yaml", "containerPort: 8080", "containerPort: 8081"}}, "http.listen"},
		{"loopback listen address", []edit{{"configmap.yaml", "listen: 0.0.0.0:8080", "listen: 127.0.0.1:8080"}}, "loopback"},
		{"grace period too short", []edit{{"deployment.yaml", "terminationGracePeriodSeconds: 40", "terminationGracePeriodSeconds: 25"}}, "terminationGracePeriodSeconds"},
		{"shutdownGrace raised alone", []edit{{"configmap.yaml", "shutdownGrace: 20s", "shutdownGrace: 60s"}}, "terminationGracePeriodSeconds"},
		{"shutdownGrace below a queue timeout", []edit{{"configmap.yaml", "shutdownGrace: 20s", "shutdownGrace: 5s"}}, "timeout"},
		{"preStop exec needs a shell", []edit{{"deployment.yaml", "              sleep:\n                seconds: 5", "              exec:\n                command: [sleep, \"5\"]"}}, "preStop"},
		{"invalid configuration", []edit{{"configmap.yaml", "concurrency: 10", "concurrency: 0"}}, "queues.emails.concurrency"},
		{"API keys under a misspelt name", []edit{{"deployment.yaml", "name: SIMPLEQ_AUTH_APIKEYS", "name: SIMPLEQ_AUTH_APIKEY"}}, "auth.apiKeys: required"},
		{"misspelt setting in env", []edit{{"deployment.yaml", "            - name: GOMEMLIMIT\n", "            - name: SIMPLEQ_DISPATCH_LINGR\n              value: 1ms\n            - name: GOMEMLIMIT\n"}}, "SIMPLEQ_DISPATCH_LINGR is set but not read"},
		{"secret key missing", []edit{{"secret.yaml", "  emails-signing-secret: whsec_change-me\n", ""}}, "emails-signing-secret"},
		{"wrong secret name", []edit{{"deployment.yaml", "                  name: simpleqd-secrets\n                  key: api-keys", "                  name: simpleqd-secret\n                  key: api-keys"}}, "simpleqd-secret"},
		{"wrong configmap name", []edit{{"deployment.yaml", "            name: simpleqd-config", "            name: simpleqd-cfg"}}, "simpleqd-cfg"},
		{"config mounted with subPath", []edit{{"deployment.yaml", "              mountPath: /etc/simpleqd\n", "              mountPath: /etc/simpleqd/simpleqd.yaml\n              subPath: simpleqd.yaml\n"}}, "subPath"},
		{"PDB selects other pods", []edit{{"poddisruptionbudget.yaml", "      app.kubernetes.io/component: daemon", "      app.kubernetes.io/component: worker"}}, "PodDisruptionBudget"},
		{"PDB blocks every drain", []edit{{"poddisruptionbudget.yaml", "  maxUnavailable: 1", "  maxUnavailable: 0"}}, "PodDisruptionBudget"},
		{"Service selects other pods", []edit{{"service.yaml", "    app.kubernetes.io/component: daemon\n  ports", "    app.kubernetes.io/component: web\n  ports"}}, "Service simpleqd"},
		{"Service targets another port", []edit{{"service.yaml", "targetPort: http", "targetPort: web"}}, "targetPort"},
		{"runs as root", []edit{{"deployment.yaml", "runAsNonRoot: true", "runAsNonRoot: false"}}, "runAsNonRoot"},
		{"writable root filesystem", []edit{{"deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false"}}, "readOnlyRootFilesystem"},
		{"no memory limit", []edit{{"deployment.yaml", "              memory: 512Mi\n", ""}}, "limits"},
		{"GOMEMLIMIT above the limit", []edit{{"deployment.yaml", "value: 450MiB", "value: 1GiB"}}, "GOMEMLIMIT"},
		{"service links on", []edit{{"deployment.yaml", "enableServiceLinks: false", "enableServiceLinks: true"}}, "enableServiceLinks"},
		{"Recreate strategy", []edit{{"deployment.yaml", "    type: RollingUpdate\n    rollingUpdate:\n      maxSurge: 1         # start the new pod first,\n      maxUnavailable: 0   # and stop an old one only once the new one is ready\n", "    type: Recreate\n"}}, "RollingUpdate"},
		{"image user differs", []edit{{"Dockerfile", "/simpleqd\nUSER 65532:65532", "/simpleqd\nUSER 1000:1000"}}, "runAsUser"},
		{"image CMD differs", []edit{{"Dockerfile", `CMD ["serve", "--config", "/etc/simpleqd/simpleqd.yaml"]`, `CMD ["serve", "--config", "/config/simpleqd.yaml"]`}}, "CMD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			copyFiles(t, ".", dir)
			dockerfile := filepath.Join(dir, "Dockerfile")
			data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dockerfile, data, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, e := range tc.edits {
				path := filepath.Join(dir, e.file)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				// Exactly one match, so an edit cannot go stale silently
				// when a manifest changes.
				if n := strings.Count(string(data), e.old); n != 1 {
					t.Fatalf("%s: %q occurs %d times, want once: update this case", e.file, e.old, n)
				}
				if err := os.WriteFile(path, []byte(strings.Replace(string(data), e.old, e.new, 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			problems := check(dir, dockerfile)
			t.Logf("check reported:\n%s", strings.Join(problems, "\n"))
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("no problem mentions %q; check reported:\n%s", tc.want, strings.Join(problems, "\n"))
			}
		})
	}
}

func copyFiles(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// kustomization is the part of kustomize's Kustomization that these
// manifests use. It is decoded strictly, so a kustomize feature this
// renderer does not implement (patches, generators, name prefixes) fails
// the test instead of being ignored: extend render when adding one.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// fleet is the rendered kustomization: every object, and the ones the
// checks look at.
type fleet struct {
	objects    []string // "file: Kind/name", in render order
	deployment *appsv1.Deployment
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
	services   []*corev1.Service
	pdbs       []*policyv1.PodDisruptionBudget
}

// problems collects what check finds.
type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// check renders dir's kustomization and returns every problem found; none
// means the manifests are consistent with each other, with the daemon's
// configuration loader and with the Dockerfile.
func check(dir, dockerfile string) []string {
	var p problems
	f := render(dir, &p)
	if f == nil {
		return p
	}
	if f.deployment == nil {
		p.addf("no Deployment rendered")
		return p
	}
	checkDeployment(f, &p)
	pod := f.deployment.Spec.Template
	c := findContainer(&pod.Spec, &p)
	if c == nil {
		return p
	}
	cfg := checkConfig(f, c, &p)
	if cfg != nil {
		checkShutdown(f, cfg, c, &p)
		checkProbesAndPorts(f, cfg, c, &p)
	}
	checkSelectors(f, &p)
	checkSecurity(f, c, &p)
	checkResources(c, &p)
	checkImage(dockerfile, f, c, &p)
	return p
}

// render reads kustomization.yaml and the files it lists, in order, decoding
// each document strictly into its Kubernetes API type: the set of objects
// `kustomize build` would print for this kustomization.
func render(dir string, p *problems) *fleet {
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		p.addf("%v", err)
		return nil
	}
	var k kustomization
	if !decodeStrict("kustomization.yaml", raw, &k, p) {
		return nil
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		p.addf("kustomization.yaml: want apiVersion kustomize.config.k8s.io/v1beta1, kind Kustomization; got %s %s", k.APIVersion, k.Kind)
	}
	// Every manifest in the directory is rendered: a file left out would be
	// reviewed here and never applied.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".yaml") && name != "kustomization.yaml" && !slices.Contains(k.Resources, name) {
			p.addf("%s is not listed in kustomization.yaml's resources", name)
		}
	}

	f := &fleet{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	seen := map[string]bool{}
	for _, res := range k.Resources {
		if filepath.Base(res) != res || !strings.HasSuffix(res, ".yaml") {
			p.addf("kustomization.yaml: resource %q: only .yaml files in this directory are rendered here", res)
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, res))
		if err != nil {
			p.addf("kustomization.yaml: resource %v", err)
			continue
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				p.addf("%s: %v", res, err)
				break
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				p.addf("%s: %v", res, err)
				continue
			}
			var obj metav1.Object
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				obj = &appsv1.Deployment{}
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			case "v1 Secret":
				obj = &corev1.Secret{}
			case "v1 Service":
				obj = &corev1.Service{}
			case "policy/v1 PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			default:
				p.addf("%s: no check knows %s %s: add its API type to render", res, tm.APIVersion, tm.Kind)
				continue
			}
			if !decodeStrict(res, doc, obj, p) {
				continue
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				if f.deployment != nil {
					p.addf("%s: a second Deployment; the checks expect one", res)
				}
				f.deployment = o
			case *corev1.ConfigMap:
				f.configMaps[o.Name] = o
			case *corev1.Secret:
				f.secrets[o.Name] = o
			case *corev1.Service:
				f.services = append(f.services, o)
			case *policyv1.PodDisruptionBudget:
				f.pdbs = append(f.pdbs, o)
			}
			key := tm.Kind + "/" + obj.GetName()
			switch {
			case obj.GetName() == "":
				p.addf("%s: %s without metadata.name", res, tm.Kind)
			case seen[key]:
				p.addf("%s: %s is defined twice", res, key)
			case obj.GetNamespace() != "":
				p.addf("%s: %s sets metadata.namespace; leave it to kubectl -n or an overlay's namespace", res, key)
			}
			seen[key] = true
			f.objects = append(f.objects, res+": "+key)
		}
	}
	return f
}

// stripComments drops comment-only lines, so a file's leading commentary is
// not taken for a document.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// decodeStrict decodes one YAML document as the API server does with
// fieldValidation=Strict: field names match case-sensitively, and unknown or
// duplicate fields are errors (recorded as problems). It reports whether the
// document decoded at all; an object with only such field errors is still
// filled in, so the other checks can look at it.
func decodeStrict(file string, doc []byte, into any, p *problems) bool {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		p.addf("%s: %v", file, err)
		return false
	}
	strict, err := kjson.UnmarshalStrict(js, into)
	if err != nil {
		p.addf("%s: %v", file, err)
		return false
	}
	for _, e := range strict {
		p.addf("%s: %v", file, e)
	}
	return true
}

func findContainer(spec *corev1.PodSpec, p *problems) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == containerName {
			return &spec.Containers[i]
		}
	}
	p.addf("Deployment: no container named %q", containerName)
	return nil
}

func checkDeployment(f *fleet, p *problems) {
	d := f.deployment
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		p.addf("Deployment %s: replicas must be at least 2, so one pod can stop while another serves", d.Name)
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		p.addf("Deployment %s: strategy must be RollingUpdate (Recreate stops every replica at once), got %q", d.Name, d.Spec.Strategy.Type)
	} else if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(replicas(d)), false); err != nil || n >= int(replicas(d)) {
			p.addf("Deployment %s: rollingUpdate.maxUnavailable %s could stop every replica at once", d.Name, ru.MaxUnavailable.String())
		}
	}
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// configPath is the --config argument the container passes to serve.
func configPath(c *corev1.Container) string {
	args := c.Args
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
	}
	return ""
}

// checkConfig finds the file the container reads, which must come from a
// ConfigMap directory mount, and loads it with config.Load and the
// container's environment (Secret values resolved), as the daemon would.
func checkConfig(f *fleet, c *corev1.Container, p *problems) *config.Config {
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		p.addf("container %s: args must start with serve, got %q", c.Name, c.Args)
	}
	path := configPath(c)
	if path == "" {
		p.addf("container %s: args name no --config file", c.Name)
		return nil
	}
	spec := f.deployment.Spec.Template.Spec
	var cm *corev1.ConfigMap
	var key string
	for _, m := range c.VolumeMounts {
		if m.MountPath != filepath.Dir(path) && m.MountPath != path {
			continue
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			p.addf("container %s: %s is mounted with subPath; the kubelet never updates such a file, so the daemon could not live-reload it: mount the ConfigMap's directory", c.Name, m.MountPath)
		}
		if !m.ReadOnly {
			p.addf("container %s: the config mount %s must be readOnly", c.Name, m.MountPath)
		}
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.ConfigMap == nil {
				p.addf("volume %s (holding %s) must be a configMap volume", v.Name, path)
				return nil
			}
			cm = f.configMaps[v.ConfigMap.Name]
			if cm == nil {
				p.addf("volume %s: ConfigMap %q is not among the manifests", v.Name, v.ConfigMap.Name)
				return nil
			}
			key = filepath.Base(path)
			if m.SubPath != "" {
				key = m.SubPath
			}
			for _, it := range v.ConfigMap.Items {
				if it.Path == filepath.Base(path) {
					key = it.Key
				}
			}
		}
	}
	if cm == nil {
		p.addf("container %s: no ConfigMap volume is mounted at %s", c.Name, filepath.Dir(path))
		return nil
	}
	text, ok := cm.Data[key]
	if !ok {
		p.addf("ConfigMap %s has no key %q (the file %s)", cm.Name, key, path)
		return nil
	}

	env := containerEnv(f, c, p)
	tmp, err := os.MkdirTemp("", "simpleqd-manifests-")
	if err != nil {
		p.addf("%v", err)
		return nil
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, filepath.Base(path))
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		p.addf("%v", err)
		return nil
	}
	cfg, err := config.Load(file, func(name string) string { return env[name] })
	if err != nil {
		p.addf("ConfigMap %s key %s with the container's environment does not load: %v", cm.Name, key, err)
		return nil
	}
	environ := make([]string, 0, len(env))
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	slices.Sort(environ)
	for _, v := range config.StrayEnv(cfg, environ, cli.EnvURL, cli.EnvAPIKey) {
		p.addf("container %s: env %s is set but not read: %s", c.Name, v.Name, v.Why)
	}
	return cfg
}

// containerEnv is the environment the kubelet would give the container:
// literal values, and Secret or ConfigMap keys (a missing optional key sets
// nothing; a missing required one would stop the pod from starting).
func containerEnv(f *fleet, c *corev1.Container, p *problems) map[string]string {
	env := map[string]string{}
	if len(c.EnvFrom) > 0 {
		p.addf("container %s: envFrom is not checked here; name each variable under env", c.Name)
	}
	for _, e := range c.Env {
		switch vf := e.ValueFrom; {
		case vf == nil:
			env[e.Name] = e.Value
		case vf.SecretKeyRef != nil:
			ref := vf.SecretKeyRef
			optional := ref.Optional != nil && *ref.Optional
			s := f.secrets[ref.Name]
			if s == nil {
				if !optional {
					p.addf("env %s: Secret %q is not among the manifests", e.Name, ref.Name)
				}
				continue
			}
			if v, ok := s.StringData[ref.Key]; ok {
				env[e.Name] = v
			} else if v, ok := s.Data[ref.Key]; ok {
				env[e.Name] = string(v)
			} else if !optional {
				p.addf("env %s: Secret %s has no key %q and the reference is not optional", e.Name, s.Name, ref.Key)
			}
		case vf.ConfigMapKeyRef != nil:
			ref := vf.ConfigMapKeyRef
			optional := ref.Optional != nil && *ref.Optional
			cm := f.configMaps[ref.Name]
			if v, ok := cm.Data[ref.Key]; cm != nil && ok {
				env[e.Name] = v
			} else if !optional {
				p.addf("env %s: ConfigMap %q has no key %q and the reference is not optional", e.Name, ref.Name, ref.Key)
			}
		default:
			p.addf("env %s: only literal values and Secret or ConfigMap keys are checked here", e.Name)
		}
	}
	return env
}

// checkShutdown: a stopping pod must finish its drain before the kubelet's
// SIGKILL. The grace period counts from the preStop hook, which runs before
// SIGTERM reaches the daemon.
func checkShutdown(f *fleet, cfg *config.Config, c *corev1.Container, p *problems) {
	spec := f.deployment.Spec.Template.Spec
	var preStop time.Duration
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		p.addf("container %s: no preStop hook: SIGTERM would come while the pod is still being removed from the Service's endpoints, and new connections would be refused", c.Name)
	} else {
		h := c.Lifecycle.PreStop
		switch {
		case h.Exec != nil:
			p.addf("container %s: the preStop hook runs a command, but the image is distroless (no shell, no sleep): use the kubelet's sleep action", c.Name)
		case h.HTTPGet != nil || h.TCPSocket != nil:
			p.addf("container %s: the preStop hook must be a sleep; the daemon has no endpoint that starts a drain", c.Name)
		case h.Sleep == nil || h.Sleep.Seconds < 1:
			p.addf("container %s: the preStop sleep must last at least 1 s", c.Name)
		default:
			preStop = time.Duration(h.Sleep.Seconds) * time.Second
		}
	}
	drain := max(cfg.ShutdownGrace, httpShutdown)
	need := preStop + drain + handBackMargin
	if spec.TerminationGracePeriodSeconds == nil {
		p.addf("Deployment: terminationGracePeriodSeconds unset (30 s), need at least %s", need)
	} else if got := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second; got < need {
		p.addf("Deployment: terminationGracePeriodSeconds %d s is too short for preStop sleep %s + shutdownGrace %s + %s margin = %s: the kubelet would SIGKILL a draining daemon",
			*spec.TerminationGracePeriodSeconds, preStop, drain, handBackMargin, need)
	}
	// A delivery started just before SIGTERM should be able to run to its
	// timeout; otherwise it is cut and delivered again by another daemon.
	longest, queue := cfg.Defaults.Timeout, "defaults"
	for _, name := range cfg.QueueNames() {
		if q := cfg.Queues[name]; q.Timeout > longest {
			longest, queue = q.Timeout, "queues."+name
		}
	}
	if cfg.ShutdownGrace < longest {
		p.addf("ConfigMap: shutdownGrace %s is shorter than %s.timeout %s: a delivery in flight at SIGTERM could be cut and sent again", cfg.ShutdownGrace, queue, longest)
	}
}

// containerPort resolves a probe's or Service's port (a number or a
// container port's name) to a container port number, or 0.
func containerPort(c *corev1.Container, port intstr.IntOrString) int32 {
	for _, cp := range c.Ports {
		if (port.Type == intstr.String && cp.Name == port.StrVal) || (port.Type == intstr.Int && cp.ContainerPort == port.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

func checkProbesAndPorts(f *fleet, cfg *config.Config, c *corev1.Container, p *problems) {
	host, portText, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		p.addf("ConfigMap: http.listen %q: %v", cfg.HTTP.Listen, err)
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		p.addf("ConfigMap: http.listen %s is a loopback address: neither the kubelet's probes nor the Service could reach it", cfg.HTTP.Listen)
	}
	listen, _ := strconv.Atoi(portText)
	found := false
	for _, cp := range c.Ports {
		if int(cp.ContainerPort) == listen {
			found = true
		}
	}
	if !found {
		p.addf("container %s: no containerPort is http.listen's port %d", c.Name, listen)
	}
	probe := func(name string, pr *corev1.Probe, path string) {
		switch {
		case pr == nil:
			p.addf("container %s: no %s", c.Name, name)
		case pr.HTTPGet == nil:
			p.addf("container %s: %s must be an httpGet of %s", c.Name, name, path)
		case pr.HTTPGet.Path != path:
			p.addf("container %s: %s must get %s, got %s", c.Name, name, path, pr.HTTPGet.Path)
		case int(containerPort(c, pr.HTTPGet.Port)) != listen:
			p.addf("container %s: %s port %s is container port %d, not http.listen's port %d", c.Name, name, pr.HTTPGet.Port.String(), containerPort(c, pr.HTTPGet.Port), listen)
		case pr.HTTPGet.Scheme != "" && pr.HTTPGet.Scheme != corev1.URISchemeHTTP:
			p.addf("container %s: %s scheme must be HTTP (the daemon serves plain HTTP)", c.Name, name)
		}
	}
	probe("readinessProbe", c.ReadinessProbe, "/readyz")
	probe("livenessProbe", c.LivenessProbe, "/healthz")
	if c.StartupProbe != nil {
		probe("startupProbe", c.StartupProbe, "/healthz")
	}

	for _, s := range f.services {
		if len(s.Spec.Ports) == 0 {
			p.addf("Service %s: no ports", s.Name)
		}
		for _, sp := range s.Spec.Ports {
			target := sp.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(sp.Port) // unset targetPort means port
			}
			if int(containerPort(c, target)) != listen {
				p.addf("Service %s: port %d's targetPort %s is container port %d, not http.listen's port %d", s.Name, sp.Port, target.String(), containerPort(c, target), listen)
			}
		}
	}
}

// checkSelectors: the Deployment, the Service, the PodDisruptionBudget and
// the spread constraint must all mean the Deployment's pods.
func checkSelectors(f *fleet, p *problems) {
	d := f.deployment
	pods := labels.Set(d.Spec.Template.Labels)
	matches := func(what string, ls *metav1.LabelSelector) {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		switch {
		case err != nil:
			p.addf("%s: selector: %v", what, err)
		case ls == nil || sel.Empty():
			p.addf("%s: an empty selector selects every pod in the namespace", what)
		case !sel.Matches(pods):
			p.addf("%s: selector %s does not match the Deployment's pod labels %s", what, sel, pods)
		}
	}
	matches("Deployment "+d.Name, d.Spec.Selector)
	for _, s := range f.services {
		if len(s.Spec.Selector) == 0 {
			p.addf("Service %s: no selector", s.Name)
		} else if sel := labels.SelectorFromSet(s.Spec.Selector); !sel.Matches(pods) {
			p.addf("Service %s: selector %s does not match the Deployment's pod labels %s", s.Name, sel, pods)
		}
	}
	if len(f.services) == 0 {
		p.addf("no Service: the API would have no stable address")
	}
	if len(f.pdbs) == 0 {
		p.addf("no PodDisruptionBudget: a drain could stop every replica at once")
	}
	for _, pdb := range f.pdbs {
		matches("PodDisruptionBudget "+pdb.Name, pdb.Spec.Selector)
		n := int(replicas(d))
		switch spec := pdb.Spec; {
		case spec.MaxUnavailable != nil:
			if v, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, n, true); err != nil || v < 1 {
				p.addf("PodDisruptionBudget %s: maxUnavailable %s allows no disruption: every node drain would block", pdb.Name, spec.MaxUnavailable.String())
			}
		case spec.MinAvailable != nil:
			if v, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, n, true); err != nil || v >= n {
				p.addf("PodDisruptionBudget %s: minAvailable %s of %d replicas allows no disruption: every node drain would block", pdb.Name, spec.MinAvailable.String(), n)
			}
		default:
			p.addf("PodDisruptionBudget %s: set maxUnavailable or minAvailable", pdb.Name)
		}
	}
	for _, tsc := range d.Spec.Template.Spec.TopologySpreadConstraints {
		matches("topologySpreadConstraints "+tsc.TopologyKey, tsc.LabelSelector)
	}
}

func checkSecurity(f *fleet, c *corev1.Container, p *problems) {
	spec := f.deployment.Spec.Template.Spec
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	isTrue := func(b *bool) bool { return b != nil && *b }
	if !isTrue(psc.RunAsNonRoot) && !isTrue(csc.RunAsNonRoot) {
		p.addf("securityContext: runAsNonRoot must be true")
	}
	if uid := runAsUser(spec, c); uid == nil || *uid == 0 {
		p.addf("securityContext: runAsUser must be a non-zero uid (the kubelet can only verify runAsNonRoot with a numeric user)")
	}
	if !isTrue(csc.ReadOnlyRootFilesystem) {
		p.addf("container %s: securityContext.readOnlyRootFilesystem must be true (the daemon writes no files)", c.Name)
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		p.addf("container %s: securityContext.allowPrivilegeEscalation must be false", c.Name)
	}
	if isTrue(csc.Privileged) {
		p.addf("container %s: must not be privileged", c.Name)
	}
	if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 {
		p.addf("container %s: securityContext.capabilities must drop ALL and add none", c.Name)
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		p.addf("Deployment: enableServiceLinks must be false: the Service's links (SIMPLEQD_SERVICE_HOST, SIMPLEQD_PORT, ...) would be warned about as misspelt settings")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p.addf("Deployment: automountServiceAccountToken must be false: the daemon never calls the Kubernetes API")
	}
}

func runAsUser(spec corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsUser
	}
	return nil
}

func checkResources(c *corev1.Container, p *problems) {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := c.Resources.Requests[name]
		limit, hasLimit := c.Resources.Limits[name]
		if !hasReq {
			p.addf("container %s: resources.requests.%s unset", c.Name, name)
		}
		if !hasLimit {
			p.addf("container %s: resources.limits.%s unset", c.Name, name)
		}
		if hasReq && hasLimit && req.Cmp(limit) > 0 {
			p.addf("container %s: resources.requests.%s %s exceeds its limit %s", c.Name, name, req.String(), limit.String())
		}
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return
	}
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		// Go's GOMEMLIMIT units (KiB, MiB, GiB) read as Kubernetes quantities
		// once the B is dropped.
		q, err := resource.ParseQuantity(strings.TrimSuffix(e.Value, "B"))
		if err != nil {
			p.addf("container %s: GOMEMLIMIT %q: %v", c.Name, e.Value, err)
		} else if q.Cmp(limit) >= 0 {
			p.addf("container %s: GOMEMLIMIT %s must be below the memory limit %s, or the kernel kills the daemon before Go's collector works harder", c.Name, e.Value, limit.String())
		}
	}
}

// checkImage reads the Dockerfile's stage the Deployment runs: its USER must
// be the pod's runAsUser and its ENTRYPOINT and CMD the container's command
// and args, so the image and the manifests describe the same process.
func checkImage(dockerfile string, f *fleet, c *corev1.Container, p *problems) {
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		p.addf("Dockerfile: %v", err)
		return
	}
	var inStage, found bool
	var user string
	var entrypoint, cmd []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		instr, rest := strings.ToUpper(fields[0]), strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), fields[0]))
		if instr == "FROM" {
			inStage = len(fields) >= 4 && strings.EqualFold(fields[2], "AS") && fields[3] == imageStage
			found = found || inStage
			continue
		}
		if !inStage {
			continue
		}
		switch instr {
		case "USER":
			user = rest
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				p.addf("Dockerfile: stage %s: %s must be in exec form (the image has no shell): %v", imageStage, instr, err)
			}
			if instr == "ENTRYPOINT" {
				entrypoint = argv
			} else {
				cmd = argv
			}
		}
	}
	if !found {
		p.addf("Dockerfile: no stage named %s", imageStage)
		return
	}
	uid := "unset"
	if u := runAsUser(f.deployment.Spec.Template.Spec, c); u != nil {
		uid = strconv.FormatInt(*u, 10)
	}
	if uidText, _, _ := strings.Cut(user, ":"); uidText != uid {
		p.addf("Dockerfile: stage %s runs as USER %q but the pod's runAsUser is %s: keep them the same numeric uid", imageStage, user, uid)
	}
	if len(c.Command) > 0 && !slices.Equal(c.Command, entrypoint) {
		p.addf("container %s: command %q differs from the image's ENTRYPOINT %q", c.Name, c.Command, entrypoint)
	}
	if !slices.Equal(c.Args, cmd) {
		p.addf("container %s: args %q differ from the image's CMD %q: keep one invocation", c.Name, c.Args, cmd)
	}
}
