{{/*
Names. Every derived name of the routing objects is the same function of the same inputs as in
the Kubernetes Compute driver (internal/compute/kube/kubecfg: RouteLabel, EnvoyServiceName, Host);
the chart tests check that they agree.
*/}}

{{/* occ.fullname: the release's base name, <release>-occ unless the release name contains "occ". */}}
{{- define "occ.fullname" -}}
{{- if contains "occ" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-occ" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
occ.clusterName: the stem of the release's cluster-scoped names, one per release namespace and
release. "<namespace>-<fullname>" when that is at most 55 characters (the names of earlier chart
versions, kept so that an upgrade keeps the tenant ClusterRole every tenant namespace's RoleBinding
names: a RoleBinding's roleRef cannot change). A longer one is cut to 44 characters (without a "-"
left at the cut), then "-" and the first 10 hex digits of sha256("<namespace>/<fullname>"), 55
characters at most: the cut alone would leave two releases in a long namespace, or two long
namespaces with a common start, one name. (Two short ones can still read the same, namespace a-b
with release c and namespace a with release b-c; helm then refuses the second install, since the
objects are the first release's.) Every cluster-scoped name, and every reference to one, comes
from the helpers below.
*/}}
{{- define "occ.clusterName" -}}
{{- $fullname := include "occ.fullname" . -}}
{{- $readable := printf "%s-%s" .Release.Namespace $fullname -}}
{{- if le (len $readable) 55 -}}
{{- $readable -}}
{{- else -}}
{{- printf "%s-%s" ($readable | trunc 44 | trimSuffix "-") (printf "%s/%s" .Release.Namespace $fullname | sha256sum | trunc 10) -}}
{{- end -}}
{{- end -}}

{{- define "occ.apiName" -}}{{ include "occ.fullname" . }}-api{{- end -}}
{{- define "occ.workerName" -}}{{ include "occ.fullname" . }}-worker{{- end -}}

{{/* The cluster-scoped objects (rbac.yaml, admission-policy.yaml) and their references. */}}
{{- define "occ.workerClusterRoleName" -}}{{ include "occ.clusterName" . }}-worker{{- end -}}
{{- define "occ.tenantRoleName" -}}{{ include "occ.clusterName" . }}-tenant{{- end -}}
{{- define "occ.workerScopePolicyName" -}}{{ include "occ.clusterName" . }}-worker-scope{{- end -}}

{{- define "occ.labels" -}}
app.kubernetes.io/name: occ
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* occ.selector COMPONENT: the labels that select one component's Pods. */}}
{{- define "occ.selector" -}}
app.kubernetes.io/name: occ
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "occ.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "occ.gatewayImage" -}}
{{- printf "%s:%s" .Values.gatewayImage.repository .Values.gatewayImage.tag -}}
{{- end -}}

{{/*
occ.imagePullSecretNames: the names of imagePullSecrets as a JSON list. The same Secrets pull the
gateway Pods' images: the driver copies them from the release namespace into each tenant namespace
(runtime.imagePullSecrets), and rbac.yaml lets the worker read exactly these.
*/}}
{{- define "occ.imagePullSecretNames" -}}
{{- $names := list -}}
{{- range .Values.imagePullSecrets -}}{{- $names = append $names .name -}}{{- end -}}
{{- toJson $names -}}
{{- end -}}

{{/* occ.workerEmbedded: "true" when the API runs the worker (the sqlite evaluation mode). */}}
{{- define "occ.workerEmbedded" -}}
{{- if eq .Values.database.mode "sqlite" -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/* Routing names (seed 003 and the reference chart). */}}
{{- define "occ.gatewayName" -}}
{{- .Values.gatewayRouting.gatewayName | default (printf "%s-agent-gateways" .Release.Name) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* occ.routeLabel: the first 12 hex digits of sha256("<release namespace>/<gateway name>"). */}}
{{- define "occ.routeLabel" -}}
{{- printf "%s/%s" .Release.Namespace (include "occ.gatewayName" .) | sha256sum | trunc 12 -}}
{{- end -}}

{{- define "occ.envoyServiceName" -}}occ-gateway-{{ include "occ.routeLabel" . }}{{- end -}}

{{- define "occ.gatewayHost" -}}
{{- .Values.gatewayRouting.hostname | default (printf "%s.%s.svc" (include "occ.envoyServiceName" .) .Values.gatewayRouting.envoyNamespace) -}}
{{- end -}}

{{- define "occ.tlsSecretName" -}}
{{- .Values.gatewayRouting.tlsSecretName | default (printf "%s-tls" (include "occ.gatewayName" .)) -}}
{{- end -}}

{{- define "occ.rootSecretName" -}}{{ include "occ.envoyServiceName" . }}-root{{- end -}}

{{/* occ.autoCA: "true" when the chart creates its own CA (no issuerRef.name). */}}
{{- define "occ.autoCA" -}}
{{- if .Values.gatewayRouting.issuerRef.name -}}false{{- else -}}true{{- end -}}
{{- end -}}

{{/* occ.caFile: "true" when OCC gets a CA bundle file (automatic CA, or an explicit bundle). */}}
{{- define "occ.caFile" -}}
{{- if and .Values.gatewayRouting.enabled (or (eq (include "occ.autoCA" .) "true") .Values.gatewayRouting.caSecretName) -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/* Mount points of the service key and the CA bundle. */}}
{{- define "occ.keyDir" -}}/etc/occ/gateway-api-key{{- end -}}
{{- define "occ.databaseDir" -}}/etc/occ/database{{- end -}}

{{/* occ.databaseVolume / occ.databaseMount: the database URL's Secret item as a file (postgres). */}}
{{- define "occ.databaseVolume" -}}
{{- if eq .Values.database.mode "postgres" }}
- name: database-url
  secret:
    secretName: {{ .Values.database.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .Values.database.secretKey }}
        path: url
{{- end }}
{{- end -}}
{{- define "occ.databaseMount" -}}
{{- if eq .Values.database.mode "postgres" }}
- name: database-url
  mountPath: {{ include "occ.databaseDir" . }}
  readOnly: true
{{- end }}
{{- end -}}
{{- define "occ.caDir" -}}/etc/occ/gateway-ca{{- end -}}

{{/*
occ.config: occ's configuration file (docs/configuration.md), the same for the API and the worker.
Its drivers.compute.kubernetes section is the driver's configuration, built from the same values
as the routing objects below.
*/}}
{{- define "occ.config" -}}
{{- $v := .Values -}}
{{- $r := $v.gatewayRouting -}}
{{- $network := dict "gatewayPort" (int $r.tenantGatewayPort) "dns" (dict "namespace" $v.compute.dns.namespace "podLabels" $v.compute.dns.podLabels) -}}
{{- if $r.enabled -}}
{{- $_ := set $network "gatewayTrustedProxyCidrs" $v.compute.gatewayTrustedProxyCidrs -}}
{{- else -}}
{{- $_ := set $network "gatewayClients" $v.compute.gatewayClients -}}
{{- end -}}
{{- $except := concat ($v.compute.modelEgressExcept | default list) ($v.networkPolicy.kubernetesAPICidrs | default list) | uniq -}}
{{- with $except -}}{{- $_ := set $network "modelEgressExcept" . -}}{{- end -}}
{{- $runtime := dict "gatewayImage" (include "occ.gatewayImage" .) "occImage" (include "occ.image" .) "imagePullPolicy" $v.image.pullPolicy "gatewayStorageSize" $v.compute.gatewayStorageSize -}}
{{- with $v.compute.gatewayStorageClassName -}}{{- $_ := set $runtime "gatewayStorageClassName" . -}}{{- end -}}
{{- with (include "occ.imagePullSecretNames" . | fromJsonArray) -}}
{{- $_ := set $runtime "imagePullSecrets" . -}}
{{- $_ := set $runtime "imagePullSecretsNamespace" $.Release.Namespace -}}
{{- end -}}
{{- $kube := dict "network" $network "runtime" $runtime "resources" $v.compute.gatewayResources -}}
{{- $_ := set $kube "tenantAccess" (dict "clusterRole" (include "occ.tenantRoleName" .) "serviceAccountName" (include "occ.workerServiceAccount" .) "serviceAccountNamespace" .Release.Namespace) -}}
{{- if $r.enabled -}}
{{- $routing := dict "gatewayName" (include "occ.gatewayName" .) "gatewayNamespace" .Release.Namespace "envoyNamespace" $r.envoyNamespace "endpointPort" (int $r.endpointPort) "envoyHttpsTargetPort" (int $r.envoyHttpsTargetPort) -}}
{{- with $r.hostname -}}{{- $_ := set $routing "hostname" . -}}{{- end -}}
{{- $_ := set $kube "gatewayRouting" $routing -}}
{{- end -}}
{{- $admin := dict "email" $v.bootstrapAdmin.email -}}
{{- if $v.bootstrapAdmin.passwordSecretName -}}{{- $_ := set $admin "passwordFile" "/etc/occ/bootstrap-admin/password" -}}{{- end -}}
{{- $cfg := dict "listen" (printf "0.0.0.0:%d" (int $v.api.port)) "dataDir" "/var/lib/occ" "publicOrigin" ($v.publicOrigin | default (printf "http://%s.%s.svc:%d" (include "occ.apiName" .) .Release.Namespace (int $v.api.port))) "log" (dict "level" $v.logLevel "format" $v.logFormat) "bootstrapAdmin" $admin "drivers" (dict "compute" (dict "driver" "kubernetes" "kubernetes" $kube)) -}}
{{- with $v.trustedProxies -}}{{- $_ := set $cfg "trustedProxies" . -}}{{- end -}}
{{- $worker := dict "concurrency" (int $v.worker.concurrency) -}}
{{- if ne $v.database.mode "sqlite" -}}{{- $_ := set $worker "healthListen" (printf "0.0.0.0:%d" (int $v.worker.healthPort)) -}}{{- end -}}
{{- $_ := set $cfg "worker" $worker -}}
{{- if $v.metrics.enabled -}}{{- $_ := set $cfg "metrics" (dict "listen" (printf "0.0.0.0:%d" (int $v.metrics.port))) -}}{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{- define "occ.apiServiceAccount" -}}{{ include "occ.apiName" . }}{{- end -}}
{{- define "occ.workerServiceAccount" -}}{{ include "occ.workerName" . }}{{- end -}}

{{/*
occ.podEnv: the environment of the API and worker containers. The database URL, the service key
and the CA bundle are files (the URL from the operator's Secret), never values in the environment.
*/}}
{{- define "occ.podEnv" -}}
- name: OCC_CONFIG
  value: /etc/occ/config/occ.yaml
{{- if eq .Values.database.mode "postgres" }}
- name: OCC_DATABASE_URL_FILE
  value: {{ include "occ.databaseDir" . }}/url
{{- end }}
{{- if .Values.gatewayRouting.enabled }}
- name: OCC_GATEWAY_API_KEY_PATH
  value: {{ include "occ.keyDir" . }}/key
{{- end }}
{{- if eq (include "occ.caFile" .) "true" }}
- name: OCC_GATEWAY_CA_FILE
  value: {{ include "occ.caDir" . }}/ca.crt
{{- end }}
{{- end -}}

{{/* occ.podVolumes / occ.podMounts: configuration, scratch, service key and CA bundle. */}}
{{- define "occ.podVolumes" -}}
- name: config
  configMap:
    name: {{ include "occ.fullname" . }}-config
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- include "occ.databaseVolume" . }}
{{- if .Values.gatewayRouting.enabled }}
- name: gateway-api-key
  secret:
    secretName: {{ .Values.gatewayRouting.apiKeySecretName }}
    defaultMode: 0440
    items:
      - key: occ
        path: key
{{- end }}
{{- if eq (include "occ.caFile" .) "true" }}
- name: gateway-ca
  secret:
{{- if eq (include "occ.autoCA" .) "true" }}
    # Only the root's public certificate, never its key; the Pod waits for cert-manager to
    # issue the Secret.
    secretName: {{ include "occ.rootSecretName" . }}
    defaultMode: 0444
    items:
      - key: tls.crt
        path: ca.crt
{{- else }}
    secretName: {{ .Values.gatewayRouting.caSecretName }}
    defaultMode: 0444
    items:
      - key: {{ .Values.gatewayRouting.caSecretKey }}
        path: ca.crt
{{- end }}
{{- end }}
{{- end -}}

{{- define "occ.podMounts" -}}
- name: config
  mountPath: /etc/occ/config
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- include "occ.databaseMount" . }}
{{- if .Values.gatewayRouting.enabled }}
- name: gateway-api-key
  mountPath: {{ include "occ.keyDir" . }}
  readOnly: true
{{- end }}
{{- if eq (include "occ.caFile" .) "true" }}
- name: gateway-ca
  mountPath: {{ include "occ.caDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/*
occ.metricsServiceName (dict "root" . "component" C): the metrics Service of component C,
<fullname>-<C>-metrics. A Service's name is a DNS label of at most 63 characters, so the full name
is cut further when needed (only the worker's, for full names over 48 characters).
*/}}
{{- define "occ.metricsServiceName" -}}
{{- $suffix := printf "-%s-metrics" .component -}}
{{- printf "%s%s" (include "occ.fullname" .root | trunc (int (sub 63 (len $suffix))) | trimSuffix "-") $suffix -}}
{{- end -}}

{{/* occ.metricsPort: the container port of the metrics listener (metrics.enabled), in the API and worker containers. */}}
{{- define "occ.metricsPort" -}}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end -}}

{{/*
occ.intOrPercent: a value the schema allows as an integer or a percentage string ("50%"), as
Kubernetes takes an IntOrString: the integer without a decimal point (values files give floats),
the percentage quoted.
*/}}
{{- define "occ.intOrPercent" -}}
{{- if kindIs "string" . -}}{{ quote . }}{{- else -}}{{ int . }}{{- end -}}
{{- end -}}

{{- define "occ.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "occ.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
