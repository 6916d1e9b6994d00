{{/* Names and labels shared by every template. */}}

{{- define "schedpolicy.name" -}}
{{- .Chart.Name -}}
{{- end -}}

{{- define "schedpolicy.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "schedpolicy.labels" -}}
app.kubernetes.io/name: {{ include "schedpolicy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "schedpolicy.scheduler.name" -}}
{{- .Values.scheduler.name -}}
{{- end -}}

{{- define "schedpolicy.scheduler.selector" -}}
app.kubernetes.io/name: {{ include "schedpolicy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end -}}

{{- define "schedpolicy.scheduler.image" -}}
{{- $tag := .Values.scheduler.image.tag | default (regexReplaceAll "^(v[0-9]+\\.[0-9]+\\.[0-9]+).*$" .Capabilities.KubeVersion.Version "${1}") -}}
{{- printf "%s:%s" .Values.scheduler.image.repository $tag -}}
{{- end -}}

{{- define "schedpolicy.operator.selector" -}}
app.kubernetes.io/name: {{ include "schedpolicy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "schedpolicy.operator.serviceAccount" -}}
{{- include "schedpolicy.fullname" . -}}
{{- end -}}

{{- define "schedpolicy.webhook.selector" -}}
app.kubernetes.io/name: {{ include "schedpolicy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "schedpolicy.webhook.serviceAccount" -}}
{{- printf "%s-webhook" (include "schedpolicy.fullname" .) -}}
{{- end -}}

{{- define "schedpolicy.webhook.service" -}}
{{- printf "%s-webhook" (include "schedpolicy.fullname" .) -}}
{{- end -}}

{{- define "schedpolicy.webhook.secret" -}}
{{- printf "%s-webhook-tls" (include "schedpolicy.fullname" .) -}}
{{- end -}}

{{- /* The product is a cluster singleton: policies, costs, labels and the scheduler name are
       cluster-wide. The cluster-scoped objects that embody it (the webhook configuration and
       the controller's ClusterRole and ClusterRoleBinding) get this fixed name, whatever the
       release is called, so that a second install collides at once. */}}
{{- define "schedpolicy.singleton" -}}
schedpolicy
{{- end -}}

{{- /* Fails the install when another release (or a hand-applied copy) already holds the
       singleton, naming where it is. `lookup` sees nothing under `helm template`, so this
       only speaks at install and upgrade time. */}}
{{- define "schedpolicy.oneReleasePerCluster" -}}
{{- $name := include "schedpolicy.singleton" . -}}
{{- $existing := lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" $name -}}
{{- if $existing -}}
{{- $annotations := $existing.metadata.annotations | default dict -}}
{{- $namespace := index $annotations "meta.helm.sh/release-namespace" | default "" -}}
{{- $release := index $annotations "meta.helm.sh/release-name" | default "" -}}
{{- if not $namespace -}}
{{- fail (printf "schedpolicy is already installed in this cluster, without Helm (ClusterRole %q exists); one install per cluster: remove it first (chart README, \"One per cluster\")" $name) -}}
{{- else if or (ne $namespace .Release.Namespace) (ne $release .Release.Name) -}}
{{- fail (printf "schedpolicy is already installed in this cluster: release %q in namespace %q; one install per cluster: upgrade that release, or uninstall it first (chart README, \"One per cluster\")" $release $namespace) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* The /metrics flags of both processes: HTTPS for callers the apiserver allows GET on
       /metrics, or plain HTTP when metrics.secure is false. */}}
{{- define "schedpolicy.metrics.args" -}}
- --metrics-port={{ .Values.metrics.port }}
{{- if not .Values.metrics.secure }}
- --metrics-insecure
{{- else if .Values.metrics.certSecret }}
- --metrics-cert=/metrics-tls/tls.crt
- --metrics-key=/metrics-tls/tls.key
{{- end }}
{{- end -}}

{{- define "schedpolicy.metrics.volumeMount" -}}
{{- if and .Values.metrics.secure .Values.metrics.certSecret }}
- name: metrics-tls
  mountPath: /metrics-tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "schedpolicy.metrics.volume" -}}
{{- if and .Values.metrics.secure .Values.metrics.certSecret }}
- name: metrics-tls
  secret:
    secretName: {{ .Values.metrics.certSecret }}
{{- end }}
{{- end -}}

{{- /* What a process serving authenticated /metrics may ask the apiserver. */}}
{{- define "schedpolicy.metrics.reviewRules" -}}
{{- if .Values.metrics.secure }}
# Authenticated /metrics: who a scraper's token belongs to, and whether it may GET /metrics.
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}
{{- end -}}

{{- /* policy or webhook: admission.mode, with auto settled by what the apiserver serves.
       `helm template` without a cluster knows only the API versions it is given
       (--api-versions), so it renders webhook for auto unless told. */}}
{{- define "schedpolicy.admissionMode" -}}
{{- $mode := .Values.admission.mode | default "auto" -}}
{{- if eq $mode "auto" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}policy{{- else -}}webhook{{- end -}}
{{- else if or (eq $mode "webhook") (eq $mode "policy") -}}
{{- $mode -}}
{{- else -}}
{{- fail (printf "admission.mode must be auto, webhook or policy, not %q" $mode) -}}
{{- end -}}
{{- end -}}
