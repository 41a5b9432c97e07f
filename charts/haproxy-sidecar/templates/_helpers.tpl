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

{{- /* The one image both containers run: the sidecar's, which carries HAProxy, so that the
HAProxy that validates (haproxy -c) is the one that serves. */ -}}
{{- define "haproxy-sidecar.image" -}}
{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}
{{- end -}}

{{- /* The service account the pods run as, and the RBAC subjects name. */ -}}
{{- define "haproxy-sidecar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "haproxy-sidecar.name" .) }}
{{- else -}}
{{ .Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}
{{- define "haproxy-sidecar.subject" -}}
- kind: ServiceAccount
  name: {{ include "haproxy-sidecar.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{- /* The namespaces where pods and EndpointSlices are read, as JSON: the release's, those
the services name, rbac.podNamespaces. */ -}}
{{- define "haproxy-sidecar.podNamespaces" -}}
{{- $ns := list .Release.Namespace -}}
{{- range $_, $svc := .Values.services }}{{ $ns = append $ns $svc.namespace }}{{ end -}}
{{- toJson (concat $ns .Values.rbac.podNamespaces | uniq) -}}
{{- end -}}
{{- /* The rules on pods and EndpointSlices: read them, report a pod left out on it (Events). */ -}}
{{- define "haproxy-sidecar.podRules" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{- /* The RBAC rule of one --watch value (PLURAL.VERSION[.GROUP][;...]): get, list and watch;
and, for the kinds whose status the sidecar writes (Ingresses, Gateways, HTTPRoutes:
docs/status.md), update and patch on their status subresource. */ -}}
{{- define "haproxy-sidecar.watchRule" -}}
{{- $parts := splitList "." (trimSuffix "." (first (splitList ";" .))) -}}
{{- $group := join "." (slice $parts 2) -}}
- apiGroups: [{{ $group | quote }}]
  resources: [{{ first $parts | quote }}]
  verbs: ["get", "list", "watch"]
{{- if has (printf "%s.%s" (first $parts) $group) (list "ingresses.networking.k8s.io" "gateways.gateway.networking.k8s.io" "httproutes.gateway.networking.k8s.io") }}
- apiGroups: [{{ $group | quote }}]
  resources: [{{ printf "%s/status" (first $parts) | quote }}]
  verbs: ["update", "patch"]
{{- end }}
{{- end -}}
{{- /* The namespace= option of one --watch value, or "". */ -}}
{{- define "haproxy-sidecar.watchNamespace" -}}
{{- range rest (splitList ";" .) }}{{ if hasPrefix "namespace=" (trim .) }}{{ trimPrefix "namespace=" (trim .) }}{{ end }}{{ end -}}
{{- end -}}
{{- /* The rules of the TLS Secret namespaces: read their Secrets, report on them with Events
(core v1 events: what status/events.go writes). */ -}}
{{- define "haproxy-sidecar.tlsSecretRules" -}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{- /* The label matchers of this release's series, for the alert rules. */ -}}
{{- define "haproxy-sidecar.alertSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "namespace=%q, pod=~%q" .Release.Namespace (printf "%s-[a-z0-9]+-[a-z0-9]+" (include "haproxy-sidecar.name" .))) -}}
{{- end -}}
