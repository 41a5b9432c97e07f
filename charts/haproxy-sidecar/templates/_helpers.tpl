{{- define "haproxy-sidecar.name" -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "haproxy-sidecar.labels" -}}
app.kubernetes.io/name: haproxy-sidecar
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- /* The one image both containers run: the sidecar's, which carries HAProxy, so that the
HAProxy that validates (haproxy -c) is the one that serves. */ -}}
{{- define "haproxy-sidecar.image" -}}
{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}
{{- end -}}
{{- define "haproxy-sidecar.selector" -}}
app.kubernetes.io/name: haproxy-sidecar
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* The RBAC rule of one --watch value (PLURAL.VERSION[.GROUP][;...]): get, list and watch. */ -}}
{{- define "haproxy-sidecar.watchRule" -}}
{{- $parts := splitList "." (trimSuffix "." (first (splitList ";" .))) -}}
- apiGroups: [{{ join "." (slice $parts 2) | quote }}]
  resources: [{{ first $parts | quote }}]
  verbs: ["get", "list", "watch"]
{{- end -}}
{{- /* The namespace= option of one --watch value, or "". */ -}}
{{- define "haproxy-sidecar.watchNamespace" -}}
{{- range rest (splitList ";" .) }}{{ if hasPrefix "namespace=" (trim .) }}{{ trimPrefix "namespace=" (trim .) }}{{ end }}{{ end -}}
{{- end -}}
{{- /* The rules of the TLS Secret namespaces: read their Secrets, report on them with Events. */ -}}
{{- define "haproxy-sidecar.tlsSecretRules" -}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}
