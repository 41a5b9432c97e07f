{{- define "haproxy-sidecar.name" -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "haproxy-sidecar.labels" -}}
app.kubernetes.io/name: haproxy-sidecar
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- define "haproxy-sidecar.selector" -}}
app.kubernetes.io/name: haproxy-sidecar
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
