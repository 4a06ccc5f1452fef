{{/* The image reference. */}}
{{- define "kuryr.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "kuryr.labels" -}}
app.kubernetes.io/name: kuryr-rs
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* kuryr.conf from a map of groups. */}}
{{- define "kuryr.conf" -}}
{{- range $group, $opts := . }}
{{- if $opts }}
[{{ $group }}]
{{- range $key, $value := $opts }}
{{ $key }} = {{ $value }}
{{- end }}
{{ end }}
{{- end -}}
{{- end -}}
