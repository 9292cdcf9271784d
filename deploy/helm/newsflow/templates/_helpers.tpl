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
{{/* The PostgreSQL sink's environment (its migration Job and its Deployment). */}}
{{- define "newsflow.sinkEnv" -}}
{{- include "newsflow.kafkaEnv" . }}
- name: NEWSFLOW_POSTGRES_DSN
  valueFrom: {secretKeyRef: {name: {{ .Values.sink.dsnSecret }}, key: dsn}}
- {name: NEWSFLOW_POSTGRES_GROUP_ID, value: {{ .Values.sink.groupId | quote }}}
- {name: NEWSFLOW_POSTGRES_READ_EVENTS, value: {{ .Values.sink.readEvents | quote }}}
- {name: NEWSFLOW_ADMIN_LISTEN, value: "0.0.0.0"}
- {name: NEWSFLOW_ADMIN_PORT, value: {{ .Values.admin.probePort | quote }}}
{{- end -}}
