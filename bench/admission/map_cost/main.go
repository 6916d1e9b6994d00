// Command map_cost times a MutatingAdmissionPolicy's JSONPatch mutations in process, with
// the apiserver's own code (k8s.io/apiserver's CEL composition and JSON patcher, compiled
// as the apiserver compiles a policy), on a pod as the bench creates it. It prints one
// JSON line per policy: nanoseconds and allocations per create, as testing.Benchmark
// measures them, and the pod the mutations leave.
//
// It leaves out what the apiserver does around a patcher (matching, conversion to the
// internal version, defaulting); those depend on the pod the policy leaves, not on how its
// CEL is written, and bench/admission/policy_cost.py times the whole in a real apiserver.
//
// Usage: map_cost [-cpuprofile FILE] [-memprofile FILE] POLICY.json...   (each file a MutatingAdmissionPolicy)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
)

var (
	podGVK = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

type result struct {
	Policy      string         `json:"policy"`
	NsPerCreate int64          `json:"ns_per_create"`
	AllocsPer   int64          `json:"allocs_per_create"`
	BytesPer    int64          `json:"bytes_per_create"`
	Pod         map[string]any `json:"pod"`
}

// compile does what the apiserver's mutating policy plugin does to a policy's variables
// and JSONPatch mutations (k8s.io/apiserver .../policy/mutating/compilation.go).
func compile(policy *admissionregistrationv1.MutatingAdmissionPolicy) (*plugincel.CompositedCompiler, []patch.Patcher, error) {
	opts := plugincel.OptionalVariableDeclarations{HasParams: false, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, nil, err
	}
	variables := make([]plugincel.NamedExpressionAccessor, 0, len(policy.Spec.Variables))
	for _, v := range policy.Spec.Variables {
		variables = append(variables, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	compiler.CompileAndStoreVariables(variables, opts, environment.StoredExpressions)
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	var patchers []patch.Patcher
	for _, m := range policy.Spec.Mutations {
		if m.PatchType != admissionregistrationv1.PatchTypeJSONPatch || m.JSONPatch == nil {
			return nil, nil, fmt.Errorf("%s: only JSONPatch mutations are timed", policy.Name)
		}
		accessor := &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}
		evaluator := compiler.CompileMutatingEvaluator(accessor, patchOpts, environment.StoredExpressions)
		if errs := evaluator.CompilationErrors(); len(errs) > 0 {
			return nil, nil, fmt.Errorf("%s: %v", policy.Name, errs)
		}
		patchers = append(patchers, patch.NewJSONPatcher(evaluator))
	}
	return compiler, patchers, nil
}

// benchPod is the pod bench/admission/policy_cost.py creates, as the apiserver has it when
// admission starts: defaulted, in the namespace the bench labels.
func benchPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "cost-", Namespace: "bench-webhook",
			Labels: map[string]string{"app": "load"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.k8s.io/pause:3.10",
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: "File",
				ImagePullPolicy: "IfNotPresent",
			}},
			RestartPolicy: "Always", DNSPolicy: "ClusterFirst", SchedulerName: "default-scheduler",
		},
	}
}

func namespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   "bench-webhook",
		Labels: map[string]string{"kubernetes.io/metadata.name": "bench-webhook"},
	}}
}

func run(ctx context.Context, scheme *runtime.Scheme, compiler *plugincel.CompositedCompiler, patchers []patch.Patcher) (runtime.Object, error) {
	obj := runtime.Object(benchPod())
	ctx = compiler.CreateContext(ctx)
	for _, p := range patchers {
		attrs := admission.NewAttributesRecord(obj, nil, podGVK, "bench-webhook", "", podGVR, "", admission.Create, &metav1.CreateOptions{}, false, nil)
		request := patch.Request{
			MatchedResource: podGVR,
			VersionedAttributes: &admission.VersionedAttributes{
				Attributes: attrs, VersionedKind: podGVK,
				VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(nil),
			},
			ObjectInterfaces:  admission.NewObjectInterfacesFromScheme(scheme),
			OptionalVariables: plugincel.OptionalVariableBindings{Authorizer: allowAll{}},
			Namespace:         namespace(),
		}
		var err error
		if obj, err = p.Patch(ctx, request, celconfig.RuntimeCELCostBudget); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

func main() {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	profile := flag.String("cpuprofile", "", "write a CPU profile of the timed loops to this file")
	allocs := flag.String("memprofile", "", "write an allocation profile (every allocation) to this file")
	flag.Parse()
	if *allocs != "" {
		goruntime.MemProfileRate = 1
		defer func() {
			f, err := os.Create(*allocs)
			if err != nil {
				fail(err)
			}
			defer f.Close()
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fail(err)
			}
		}()
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	for _, path := range flag.Args() {
		raw, err := os.ReadFile(path)
		if err != nil {
			fail(err)
		}
		policy := &admissionregistrationv1.MutatingAdmissionPolicy{}
		if err := json.Unmarshal(raw, policy); err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
		if policy.Kind != "MutatingAdmissionPolicy" || len(policy.Spec.Mutations) == 0 {
			fail(fmt.Errorf("%s: a MutatingAdmissionPolicy with mutations, not a %s with %d", path, policy.Kind, len(policy.Spec.Mutations)))
		}
		compiler, patchers, err := compile(policy)
		if err != nil {
			fail(err)
		}
		out, err := run(ctx, scheme, compiler, patchers)
		if err != nil {
			fail(fmt.Errorf("%s: %w", policy.Name, err))
		}
		pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
		if err != nil {
			fail(err)
		}
		timed := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := run(ctx, scheme, compiler, patchers); err != nil {
					b.Fatal(err)
				}
			}
		})
		line, _ := json.Marshal(result{policy.Name, timed.NsPerOp(), timed.AllocsPerOp(), timed.AllocedBytesPerOp(), pod})
		fmt.Println(string(line))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "map_cost:", err)
	os.Exit(1)
}
