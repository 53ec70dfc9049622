{{/*
The install's name: the release's, as `oz-manager manifests --name` takes it. Everything is
named after it (`<name>-manager`, `<name>-webhook`, ...).
*/}}
{{- define "oz.name" -}}
{{- if gt (len .Release.Name) 51 -}}
{{- fail (printf "release name %q is too long: at most 51 characters (`<name>-webhook-tls` must stay a DNS label)" .Release.Name) -}}
{{- end -}}
{{- .Release.Name -}}
{{- end }}

{{/* The labels of every object, as the install writes them; Helm's own are added by the chart. */}}
{{- define "oz.labels" -}}
app.kubernetes.io/instance: {{ include "oz.name" . }}
app.kubernetes.io/name: oz
{{- end }}

{{/* Labels only the chart adds (Helm's standard ones): the named difference from the install. */}}
{{- define "oz.chartLabels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The metadata labels of an object: the install's and Helm's. */}}
{{- define "oz.metadataLabels" -}}
{{ include "oz.labels" . }}
{{ include "oz.chartLabels" . }}
{{- end }}

{{/* The labels the pods carry and the Services select. */}}
{{- define "oz.selectorLabels" -}}
app.kubernetes.io/component: manager
{{ include "oz.labels" . }}
{{- end }}

{{/*
The parts to run, in flag order, joined by commas as `--controllers` writes them; fails on a
part oz does not have, on none, and on sessions without webhooks.
*/}}
{{- define "oz.parts" -}}
{{- $known := list "exec" "pod" "webhooks" "sessions" -}}
{{- range .Values.controllers -}}
{{- if not (has . $known) -}}
{{- fail (printf "controllers: unknown part %q: want exec, pod, webhooks or sessions" .) -}}
{{- end -}}
{{- end -}}
{{- $parts := list -}}
{{- range $known -}}
{{- if has . $.Values.controllers -}}
{{- $parts = append $parts . -}}
{{- end -}}
{{- end -}}
{{- if not $parts -}}
{{- fail "controllers: empty: choose some of exec, pod and webhooks" -}}
{{- end -}}
{{- if and (has "sessions" $parts) (not (has "webhooks" $parts)) -}}
{{- fail "controllers: sessions serve the webhooks' certificate: add webhooks" -}}
{{- end -}}
{{- if and (or .Values.webhook.clientCASecret .Values.webhook.ingressCIDRs) (not (has "webhooks" $parts)) -}}
{{- fail "webhook.clientCASecret and webhook.ingressCIDRs protect the webhooks: add webhooks to controllers, or leave them empty" -}}
{{- end -}}
{{- join "," $parts -}}
{{- end }}

{{/* Whether a part runs: include "oz.runs" (list . "webhooks") is "true" or "". */}}
{{- define "oz.runs" -}}
{{- $root := index . 0 -}}
{{- if has (index . 1) (splitList "," (include "oz.parts" $root)) }}true{{ end -}}
{{- end }}

{{/* The watched namespaces without blanks and repeats, in the order given. */}}
{{- define "oz.watched" -}}
{{- $watched := list -}}
{{- range .Values.watchNamespaces -}}
{{- if and . (not (has . $watched)) -}}
{{- $watched = append $watched . -}}
{{- end -}}
{{- end -}}
{{- join "," $watched -}}
{{- end }}

{{/* oz-manager's RBAC rules at a place (watched, state, cluster), from _rules.tpl. */}}
{{- define "oz.rules" -}}
{{- $root := index . 0 -}}
{{- include (printf "oz.rules.%s.%s" (index . 1) (include "oz.parts" $root)) $root | replace "OZNAME" (include "oz.name" $root) -}}
{{- end }}

{{/* The binding subject: oz-manager's ServiceAccount. */}}
{{- define "oz.subjects" -}}
- kind: ServiceAccount
  name: {{ include "oz.name" . }}-manager
  namespace: {{ .Release.Namespace }}
{{- end }}

{{- /* The audit webhook's failurePolicy (webhook.podExecWatcher.failurePolicy, Oz's value name),
       checked: oz-manager refuses anything but these two words. */ -}}
{{- define "oz.auditFailurePolicy" -}}
{{- $policy := .Values.webhook.podExecWatcher.failurePolicy -}}
{{- if not (has $policy (list "Ignore" "Fail")) -}}
{{- fail (printf "webhook.podExecWatcher.failurePolicy: %q: want Ignore or Fail" $policy) -}}
{{- end -}}
{{- $policy -}}
{{- end -}}

{{/* The fleet hub's namespace (fleet.hub.namespace), checked: a Role goes there. */}}
{{- define "oz.fleetNamespace" -}}
{{- $namespace := .Values.fleet.hub.namespace | toString -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" $namespace) -}}
{{- fail (printf "fleet.hub.namespace: %q is not a namespace name" $namespace) -}}
{{- end -}}
{{- $namespace -}}
{{- end }}

{{/*
The fleet hub's provider file: fleet.hub.providerFile if set, else provider secretreader running
the image's plugin, reading the spokes' token Secrets in the fleet namespace (POD_NAMESPACE, which
the plugin reads its namespace from), as `oz-manager manifests --fleet-hub` writes it.
*/}}
{{- define "oz.fleetProviderFile" -}}
{{- if .Values.fleet.hub.providerFile -}}
{{- .Values.fleet.hub.providerFile -}}
{{- else -}}
{{- $env := list (dict "name" "POD_NAMESPACE" "value" (include "oz.fleetNamespace" .)) -}}
{{- $exec := dict "apiVersion" "client.authentication.k8s.io/v1" "command" "/usr/local/bin/secretreader-plugin" "provideClusterInfo" true "env" $env -}}
{{- dict "providers" (list (dict "name" "secretreader" "execConfig" $exec)) | toJson -}}
{{- end -}}
{{- end }}

{{/* A fleet spoke's hub user (--fleet-hub-user): fleet.spoke.hubUser, or the account the chart creates. */}}
{{- define "oz.fleetHubUser" -}}
{{- .Values.fleet.spoke.hubUser | default (printf "system:serviceaccount:%s:oz-fleet-hub" .Release.Namespace) -}}
{{- end }}
