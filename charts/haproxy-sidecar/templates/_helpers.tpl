{{- /* The chart's name (nameOverride): the app.kubernetes.io/name label. */ -}}
{{- define "haproxy-sidecar.name" -}}
{{ .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end -}}
{{- /* The objects' name: fullnameOverride, else the release's name (RELEASE-NAMEOVERRIDE with a
nameOverride the release's name does not hold). Two releases in one namespace have their own. */ -}}
{{- define "haproxy-sidecar.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{ .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if and .Values.nameOverride (not (contains .Values.nameOverride .Release.Name)) -}}
{{ printf "%s-%s" .Release.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- else -}}
{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end -}}
{{- end -}}
{{- define "haproxy-sidecar.labels" -}}
{{ include "haproxy-sidecar.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
{{- /* The selector labels as a label selector (k=v,...), for --peers-selector. */ -}}
{{- define "haproxy-sidecar.peersSelector" -}}
{{- $sel := list -}}
{{- range $k, $v := include "haproxy-sidecar.selector" . | fromYaml }}{{ $sel = append $sel (printf "%s=%s" $k $v) }}{{ end -}}
{{- join "," $sel -}}
{{- end -}}
{{- define "haproxy-sidecar.selector" -}}
app.kubernetes.io/name: {{ include "haproxy-sidecar.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* The one image both containers run: the sidecar's, which carries HAProxy, so that the
HAProxy that validates (haproxy -c) is the one that serves. A digest pins it (the tag stays, for
people to read; the runtime pulls the digest). */ -}}
{{- define "haproxy-sidecar.image" -}}
{{- $ref := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- with .Values.image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end -}}
{{ $ref | quote }}
{{- end -}}

{{- /* The inputs' names (the sidecar's --services-configmap, ...): the value, else
FULLNAME-services, FULLNAME-config, FULLNAME-certificates, FULLNAME-keys, so that two releases
in one namespace do not read each other's. Call with (list $ "servicesConfigMap"). */ -}}
{{- define "haproxy-sidecar.input" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $suffix := dict "servicesConfigMap" "services" "configConfigMap" "config" "certificatesConfigMap" "certificates" "keysSecret" "keys" -}}
{{- index $root.Values.inputs $key | default (printf "%s-%s" (include "haproxy-sidecar.fullname" $root) (index $suffix $key)) -}}
{{- end -}}
{{- /* The Secret of the stats password: the value's name, else FULLNAME-stats. */ -}}
{{- define "haproxy-sidecar.statsSecret" -}}
{{- .Values.sidecar.statsPasswordSecret.name | default (printf "%s-stats" (include "haproxy-sidecar.fullname" .)) -}}
{{- end -}}

{{- /* The pod's terminationGracePeriodSeconds: the preStop sleep, then HAProxy's soft stop
(at most hard-stop-after), and a margin: the kubelet kills what is left after it. */ -}}
{{- define "haproxy-sidecar.gracePeriod" -}}
{{- add .Values.drain.preStopSeconds .Values.drain.hardStopAfterSeconds .Values.drain.marginSeconds -}}
{{- end -}}

{{- /* The service account the pods run as, and the RBAC subjects name. */ -}}
{{- define "haproxy-sidecar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "haproxy-sidecar.fullname" .) }}
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
and, for the kinds whose status the sidecar writes (Ingresses, GatewayClasses, Gateways, HTTPRoutes:
docs/status.md), update and patch on their status subresource. */ -}}
{{- define "haproxy-sidecar.watchRule" -}}
{{- $parts := splitList "." (trimSuffix "." (first (splitList ";" .))) -}}
{{- $group := join "." (slice $parts 2) -}}
- apiGroups: [{{ $group | quote }}]
  resources: [{{ first $parts | quote }}]
  verbs: ["get", "list", "watch"]
{{- if has (printf "%s.%s" (first $parts) $group) (list "ingresses.networking.k8s.io" "gatewayclasses.gateway.networking.k8s.io" "gateways.gateway.networking.k8s.io" "httproutes.gateway.networking.k8s.io") }}
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

{{- /* The label matchers of the sidecar's scrape target among the release's up series: the
ServiceMonitor's endpoint (HAProxy's exporter is another); none with the scrape annotations,
which name the sidecar's port only. */ -}}
{{- define "haproxy-sidecar.sidecarTarget" -}}
{{- $target := .Values.prometheusRule.sidecarTarget | default (ternary "endpoint=\"metrics\"" "" .Values.serviceMonitor.enabled) -}}
{{- include "haproxy-sidecar.alertSelector" . }}{{ with $target }}, {{ . }}{{ end -}}
{{- end -}}
{{- /* The label matchers of this release's series, for the alert rules. */ -}}
{{- define "haproxy-sidecar.alertSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "namespace=%q, pod=~%q" .Release.Namespace (printf "%s-[a-z0-9]+-[a-z0-9]+" (include "haproxy-sidecar.fullname" .))) -}}
{{- end -}}

{{- /* The HAProxy container's script: wait for the sidecar's first configuration, then run
HAProxy in master-worker mode as a child of this shell, which turns the container's stop signal
(SIGTERM: the image's STOPSIGNAL; SIGUSR1: HAProxy's; SIGINT) into SIGUSR1 for the master: a
soft stop (it stops listening, its workers finish their connections, hard-stop-after bounds
them), whichever signal the runtime sends. As PID 1, a shell ignores a signal it does not trap. */ -}}
{{- define "haproxy-sidecar.haproxyScript" -}}
trap 'exit 0' TERM INT USR1
until [ -e /etc/haproxy/haproxy.cfg ]; do sleep 0.5; done
haproxy -W -S /var/run/haproxy/master.sock,level,admin -f /etc/haproxy/haproxy.cfg &
pid=$!
trap 'kill -USR1 "$pid" 2>/dev/null' TERM INT USR1
status=0
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; status=$?; done
exit "$status"
{{- end -}}

{{- /* The member clusters as --cluster takes them, comma-separated: NAME=FILE[:CONTEXT], FILE the
kubeconfig key of the member's Secret, mounted at clusterDir/NAME. */ -}}
{{- define "haproxy-sidecar.clusterDir" -}}/var/run/haproxy-sidecar/clusters{{- end -}}
{{- define "haproxy-sidecar.clusters" -}}
{{- $dir := include "haproxy-sidecar.clusterDir" . }}
{{- $out := list }}
{{- range .Values.clusters.members }}
{{- $c := printf "%s=%s/%s/%s" .name $dir .name (.key | default "kubeconfig") }}
{{- with .context }}{{ $c = printf "%s:%s" $c . }}{{ end }}
{{- $out = append $out $c }}
{{- end }}
{{- join "," $out }}
{{- end -}}
