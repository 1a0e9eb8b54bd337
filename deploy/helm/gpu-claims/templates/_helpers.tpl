{{- define "gpu-claims.labels" -}}
{{ include "gpu-claims.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "gpu-claims.selector" -}}
app.kubernetes.io/name: gpu-claims
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- /* Combinations no schema can refuse, refused at render. */ -}}
{{- define "gpu-claims.guards" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicas > 1 needs leaderElection.enabled=true: without an election every replica writes, and budgets hold against one writer only" }}
{{- end }}
{{- if and (not .Values.webhook.certs.certManager) (not .Values.webhook.certs.caBundle) }}
{{- fail "webhook.certs.certManager=false needs webhook.certs.caBundle: without cert-manager's CA injection no API server can trust the webhook, and with failurePolicy Fail no GPU VM starts" }}
{{- end }}
{{- end }}

{{- /* The service account the chart's own scrape objects authenticate as
(its token in a Secret), when they are rendered and /metrics needs a
token; empty otherwise. */ -}}
{{- define "gpu-claims.scraper" -}}
{{- $m := .Values.monitoring -}}
{{- if and (eq .Values.http.auth "kubernetes") (or $m.serviceMonitor.enabled $m.vmServiceScrape.enabled) -}}
{{ .Release.Name }}-scraper
{{- end -}}
{{- end }}

{{- /* How a scrape object reaches /metrics over TLS: checked against the
webhook certificate's CA (cert-manager's self-signed issuer puts it in the
Secret as ca.crt) for the Service's name; without cert-manager, whatever
Secret the operator brings may lack ca.crt, so the certificate is not
checked (the token is still encrypted). */ -}}
{{- define "gpu-claims.scrapeTLS" -}}
{{- if .Values.http.tls -}}
scheme: https
tlsConfig:
{{- if .Values.webhook.certs.certManager }}
  serverName: {{ .Release.Name }}.{{ .Release.Namespace }}.svc
  ca:
    secret:
      name: {{ .Values.webhook.certs.secretName }}
      key: ca.crt
{{- else }}
  insecureSkipVerify: true
{{- end }}
{{- end -}}
{{- end }}
