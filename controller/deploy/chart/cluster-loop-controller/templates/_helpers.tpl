{{- define "clc.labels" -}}
app.kubernetes.io/name: cluster-loop-controller
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
