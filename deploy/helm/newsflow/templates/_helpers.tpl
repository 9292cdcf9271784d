{{- define "newsflow.name" -}}{{ .Release.Name }}{{- end -}}
{{- define "newsflow.headless" -}}{{ .Release.Name }}-headless{{- end -}}
{{- define "newsflow.labels" -}}
app.kubernetes.io/name: newsflow
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{/* The Kafka environment every newsflow container shares (pods and the topics Job). */}}
{{- define "newsflow.kafkaEnv" -}}
- {name: NEWSFLOW_KAFKA_BROKERS, value: {{ .Values.kafka.brokers | quote }}}
- {name: NEWSFLOW_KAFKA_TOPIC_PREFIX, value: {{ .Values.kafka.topicPrefix | quote }}}
- {name: NEWSFLOW_STATE_CHANGELOG, value: {{ .Values.state.changelog | quote }}}
{{- if .Values.kafka.properties }}
- {name: NEWSFLOW_KAFKA_PROPERTIES, value: {{ join "," .Values.kafka.properties | quote }}}
{{- end }}
{{- end -}}
