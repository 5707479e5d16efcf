{{/* The chart's name, and the release's full name (at most 63 characters, DNS labels). */}}
{{- define "realmgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "realmgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The admin Service's name: the full name, shortened to leave room for "-admin". */}}
{{- define "realmgate.adminName" -}}
{{- printf "%s-admin" (include "realmgate.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}

{{- define "realmgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "realmgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "realmgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "realmgate.labels" -}}
helm.sh/chart: {{ include "realmgate.chart" . }}
{{ include "realmgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "realmgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "realmgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "realmgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "realmgate.secretName" -}}
{{- default (include "realmgate.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* Where the Secret's files are mounted; each `<NAME>_FILE` names one of them. */}}
{{- define "realmgate.secretsDir" -}}
/run/secrets/realmgate
{{- end }}

{{/*
The settings the Secret holds: `secrets.keys` for an existing Secret, else the keys of
`secrets.values` (values.schema.json requires the credentials the gateway needs either way).
*/}}
{{- define "realmgate.secretKeys" -}}
{{- if .Values.secrets.existingSecret }}
{{- toJson .Values.secrets.keys }}
{{- else }}
{{- keys .Values.secrets.values | sortAlpha | toJson }}
{{- end }}
{{- end }}

{{/* The gateway's settings that the ConfigMap carries: those set, as strings. */}}
{{- define "realmgate.settings" -}}
{{- $settings := dict }}
{{- range $name, $value := .Values.config }}
{{- if and (not (kindIs "invalid" $value)) (ne (toString $value) "") }}
{{- $text := toString $value }}
{{- /* YAML numbers may arrive as floats: 1000000 is written so, not as 1e+06. */}}
{{- if and (kindIs "float64" $value) (eq (float64 (int64 $value)) $value) }}
{{- $text = toString (int64 $value) }}
{{- end }}
{{- $_ := set $settings $name $text }}
{{- end }}
{{- end }}
{{- if not (hasKey $settings "KEYCLOAK_URL") }}
{{- fail "config.KEYCLOAK_URL is required: Keycloak as the gateway reaches it, e.g. http://keycloak-service.keycloak.svc:8080/auth" }}
{{- end }}
{{- /*
What the gateway checks across settings at start (loadConfig in src/config/config.ts), so that
helm refuses it instead of every new replica; null is the gateway's default, from
files/gateway-defaults.json (generated from src/config: npm run chart:schema).
test/unit/chart/chart-settings.test.ts finds the same verdicts as the gateway's.
*/}}
{{- $c := .Values.config }}
{{- $d := .Files.Get "files/gateway-defaults.json" | fromJson }}
{{- $days := int (default $d.AUDIT_RETENTION_DAYS $c.AUDIT_RETENTION_DAYS) }}
{{- $minDays := int (default $d.AUDIT_RETENTION_MIN_DAYS $c.AUDIT_RETENTION_MIN_DAYS) }}
{{- $maxDays := int (default $d.AUDIT_RETENTION_MAX_DAYS $c.AUDIT_RETENTION_MAX_DAYS) }}
{{- if or (lt $days $minDays) (gt $days $maxDays) }}
{{- fail (printf "config.AUDIT_RETENTION_DAYS (%d) must lie within AUDIT_RETENTION_MIN_DAYS and AUDIT_RETENTION_MAX_DAYS (%d to %d; null: %d, %d and %d)" $days $minDays $maxDays (int $d.AUDIT_RETENTION_DAYS) (int $d.AUDIT_RETENTION_MIN_DAYS) (int $d.AUDIT_RETENTION_MAX_DAYS)) }}
{{- end }}
{{- if and $c.AUDIT_OTEL_LOGS (not $c.OTEL_EXPORTER_OTLP_ENDPOINT) }}
{{- fail "config.AUDIT_OTEL_LOGS needs config.OTEL_EXPORTER_OTLP_ENDPOINT (where the logs go)" }}
{{- end }}
{{- /*
Behind the Ingress, clients reach the gateway at the Ingress's address, and tokens' issuer,
DPoP proofs' `htu`, the protected-resource metadata and redirects name PUBLIC_URL: never the
gateway's default, localhost. Not set: the Ingress's host, https when ingress.tls covers it.
*/}}
{{- if .Values.ingress.enabled }}
{{- if hasKey $settings "PUBLIC_URL" }}
{{- $h := (urlParse $settings.PUBLIC_URL).hostname | lower }}
{{- if or (eq $h "localhost") (hasSuffix ".localhost" $h) (hasPrefix "127." $h) (eq $h "::1") (eq $h "0.0.0.0") }}
{{- fail (printf "config.PUBLIC_URL (%s) names localhost, but clients reach the gateway through the Ingress: tokens' issuer, DPoP proofs and redirects would name it. Set it to the address clients use (e.g. https://api.example.com), or null to take the Ingress's host" $settings.PUBLIC_URL) }}
{{- end }}
{{- else }}
{{- $hosts := list }}
{{- range .Values.ingress.hosts }}
{{- $hosts = append $hosts (.host | default "") }}
{{- end }}
{{- $hosts = uniq $hosts }}
{{- if gt (len $hosts) 1 }}
{{- fail (printf "ingress.hosts has several hosts (%s): set config.PUBLIC_URL to the one clients use (tokens' issuer, DPoP proofs and redirects name it)" (join ", " $hosts)) }}
{{- end }}
{{- $host := first $hosts }}
{{- if or (not $host) (contains "*" $host) }}
{{- fail (printf "ingress.hosts[0].host (%q) is no single address to take config.PUBLIC_URL from: set config.PUBLIC_URL to the address clients use" $host) }}
{{- end }}
{{- $scheme := "http" }}
{{- range .Values.ingress.tls }}
{{- if has $host (.hosts | default list) }}
{{- $scheme = "https" }}
{{- end }}
{{- end }}
{{- $_ := set $settings "PUBLIC_URL" (printf "%s://%s" $scheme $host) }}
{{- end }}
{{- end }}
{{- if not (hasKey $settings "BACKCHANNEL_LOGOUT_URL") }}
{{- $_ := set $settings "BACKCHANNEL_LOGOUT_URL" (printf "http://%s.%s.svc:%v/backchannel-logout" (include "realmgate.adminName" .) .Release.Namespace .Values.adminService.port) }}
{{- end }}
{{- /* Every interface, IPv6 and IPv4: the pod's address may be of either family (src/server.ts). */}}
{{- $_ := set $settings "HOST" "::" }}
{{- $_ := set $settings "ADMIN_HOST" "::" }}
{{- toJson $settings }}
{{- end }}
