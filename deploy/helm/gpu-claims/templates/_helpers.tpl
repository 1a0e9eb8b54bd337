{{- define "gpu-claims.labels" -}}
app.kubernetes.io/name: gpu-claims
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpu-claims.selector" -}}
app.kubernetes.io/name: gpu-claims
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
