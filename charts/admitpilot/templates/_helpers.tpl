{{/* Common names and labels. */}}
{{- define "admitpilot.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "admitpilot.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "admitpilot.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "admitpilot.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "admitpilot.tlsSecret" -}}
{{ include "admitpilot.fullname" . }}-webhook-tls
{{- end -}}

{{- define "admitpilot.webhookConfig" -}}
{{ include "admitpilot.fullname" . }}
{{- end -}}

{{- define "admitpilot.certsGenName" -}}
{{ include "admitpilot.fullname" . }}-certs-gen
{{- end -}}

{{/* Webhook clientConfig: the Service by default, or the development URL. */}}
{{- define "admitpilot.clientConfig" -}}
{{- if .Values.webhook.url }}
url: {{ .Values.webhook.url | quote }}
{{- else }}
service:
  name: {{ include "admitpilot.fullname" . }}
  namespace: {{ .Release.Namespace }}
  path: /validate
  port: 443
{{- end }}
{{- end -}}
