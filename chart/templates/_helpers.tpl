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

{{- define "schedpolicy.webhook.service" -}}
{{- printf "%s-webhook" (include "schedpolicy.fullname" .) -}}
{{- end -}}

{{- define "schedpolicy.webhook.secret" -}}
{{- printf "%s-webhook-tls" (include "schedpolicy.fullname" .) -}}
{{- end -}}
