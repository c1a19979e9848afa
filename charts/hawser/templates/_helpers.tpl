{{/*
Names follow `hawser install`: the server's Deployment and ServiceAccount are `velero`, one
server per namespace.
*/}}

{{/* The labels of every object: install's `component: velero`, Helm's own, and .Values.labels. */}}
{{- define "hawser.labels" -}}
component: velero
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the server runs as. */}}
{{- define "hawser.serviceAccount" -}}
{{- .Values.serviceAccount.server.name | default "velero" -}}
{{- end }}

{{/* Velero names its cluster binding `velero` in the `velero` namespace, `velero-<ns>` elsewhere. */}}
{{- define "hawser.bindingName" -}}
{{- if eq .Release.Namespace "velero" -}}velero{{- else -}}velero-{{ .Release.Namespace }}{{- end -}}
{{- end }}

{{/* The credentials Secret mounted into the server, or nothing when there is none. */}}
{{- define "hawser.credentialsSecret" -}}
{{- if .Values.credentials.useSecret -}}
{{- if .Values.credentials.existingSecret -}}
{{- .Values.credentials.existingSecret -}}
{{- else if .Values.credentials.secretContents -}}
{{- .Values.credentials.name | default "cloud-credentials" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The image reference. */}}
{{- define "hawser.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end -}}
{{- end }}

{{/* The names of the storage locations that use the chart's credentials Secret. */}}
{{- define "hawser.credentialLocations" -}}
{{- $names := list -}}
{{- range .Values.configuration.backupStorageLocation -}}
{{- if not .credential -}}
{{- $names = append $names (.name | default "default") -}}
{{- end -}}
{{- end -}}
{{- if $names -}}{{ join "," $names }}{{- else -}}default{{- end -}}
{{- end }}
