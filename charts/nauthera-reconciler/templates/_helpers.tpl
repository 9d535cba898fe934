{{/*
The names and labels are deploy/'s, so that the chart and kustomize install the same objects
(tests/tests/helm.rs compares them). No Helm-specific labels: helm install adds its own ownership
metadata when it creates the objects.
*/}}

{{/* The label deploy/base puts on everything it installs. */}}
{{- define "nauthera-reconciler.partOf" -}}
app.kubernetes.io/part-of: nauthera
{{- end -}}

{{/* The DNS name of the client certificate: the identity nauthera-server sees, dns:<this>. */}}
{{- define "nauthera-reconciler.identity" -}}
{{- if .Values.tls.identity -}}
{{ .Values.tls.identity }}
{{- else if .Values.clusterName -}}
nauthera-reconciler.{{ .Release.Namespace }}.{{ .Values.clusterName }}.svc
{{- else -}}
nauthera-reconciler.{{ .Release.Namespace }}.svc
{{- end -}}
{{- end -}}

{{- define "nauthera-reconciler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
One reconciler's Deployment. The argument is a dict:
  root               the chart's root context
  name               the Deployment's name, which is also its pods' app.kubernetes.io/name
  shard              the shard's name, or "" for the unsharded reconciler
  namespaces         the namespaces it is limited to, or an empty list
  namespaceSelector  its namespace selector, or ""
  kinds              the kinds it reconciles, or an empty list
A shard's settings come first in its environment, the unsharded reconciler's scope after the
common settings, as deploy/overlays/shards has them.
*/}}
{{- define "nauthera-reconciler.deployment" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
{{- $scope := list -}}
{{- if .namespaces -}}
{{- $scope = append $scope (dict "name" "NAUTHERA_NAMESPACES" "value" (join "," .namespaces)) -}}
{{- end -}}
{{- if .namespaceSelector -}}
{{- $scope = append $scope (dict "name" "NAUTHERA_NAMESPACE_SELECTOR" "value" .namespaceSelector) -}}
{{- end -}}
{{- if .kinds -}}
{{- $scope = append $scope (dict "name" "NAUTHERA_KINDS" "value" (join "," .kinds)) -}}
{{- end -}}
{{- $env := list -}}
{{- if .shard -}}
{{- $env = append $env (dict "name" "NAUTHERA_SHARD" "value" .shard) -}}
{{- $env = concat $env $scope -}}
{{- end -}}
{{- $env = append $env (dict "name" "NAUTHERA_SERVER_ADDRESS" "value" $values.server.address) -}}
{{- $env = append $env (dict "name" "NAUTHERA_TLS_SERVER_NAME" "value" $values.server.tlsServerName) -}}
{{- $env = append $env (dict "name" "NAUTHERA_TLS_DIR" "value" "/var/run/nauthera/tls") -}}
{{- $env = append $env (dict "name" "NAUTHERA_TLS_SECRET" "value" $values.tls.secretName) -}}
{{- $env = append $env (dict "name" "NAUTHERA_IDENTITY" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.name"))) -}}
{{- $env = append $env (dict "name" "NAUTHERA_LEASE_NAMESPACE" "valueFrom" (dict "fieldRef" (dict "fieldPath" "metadata.namespace"))) -}}
{{- if not .shard -}}
{{- $env = concat $env $scope -}}
{{- end -}}
{{- if $values.clusterName -}}
{{- $env = append $env (dict "name" "NAUTHERA_CLUSTER_NAME" "value" $values.clusterName) -}}
{{- end -}}
{{- $env = concat $env $values.extraEnv -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    app.kubernetes.io/name: {{ .name }}
    {{- include "nauthera-reconciler.partOf" $root | nindent 4 }}
spec:
  replicas: {{ $values.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ .name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .name }}
      {{- with $values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: nauthera-reconciler
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      {{- with $values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: reconciler
          image: {{ include "nauthera-reconciler.image" $root | quote }}
          {{- with $values.image.pullPolicy }}
          imagePullPolicy: {{ . }}
          {{- end }}
          args:
            - --log-format={{ $values.logFormat }}
          env:
            {{- toYaml $env | nindent 12 }}
          ports:
            - name: metrics
              containerPort: 8080
            - name: probes
              containerPort: 8081
          livenessProbe:
            {{- toYaml $values.livenessProbe | nindent 12 }}
          readinessProbe:
            {{- toYaml $values.readinessProbe | nindent 12 }}
          {{- with $values.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            # Mounted as a whole folder, never with subPath, so the kubelet swaps in renewed
            # certificates and the reconciler reads them on its next connection.
            - name: tls
              mountPath: /var/run/nauthera/tls
              readOnly: true
      volumes:
        - name: tls
          secret:
            secretName: {{ $values.tls.secretName }}
      {{- with $values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

{{/*
The reconciler's rules on namespaced objects: in its ClusterRole (every namespace), or, with
.Values.namespaces, in the ClusterRole nauthera-reconciler-namespaced that a RoleBinding grants in
each of those namespaces. deploy/base/rbac.yaml has the same rules in the same order.
*/}}
{{- define "nauthera-reconciler.namespacedRules" -}}
# Watch the manifests and keep the finalizer on them.
- apiGroups: ["nauthera.io"]
  resources: ["oidcclients", "brandings", "identityproviders", "organizations"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["nauthera.io"]
  resources:
    - oidcclients/status
    - brandings/status
    - identityproviders/status
    - organizations/status
  verbs: ["get", "patch"]
# Owner references with blockOwnerDeletion on delivered Secrets need update on finalizers.
- apiGroups: ["nauthera.io"]
  resources: ["oidcclients/finalizers"]
  verbs: ["update"]
# Deliver generated client secrets; read the Secrets that secretRef names; remove a Secret it
# delivered once the manifest names another (only Secrets the manifest owns are deleted).
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# Name the workloads that read a rotated Secret, with their restart commands (listed only
# when a secret is rotated).
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["list"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# The ClientApprovals that release a held OIDCClient, watched like the manifests they
# approve. Read only: the reconciler never approves.
- apiGroups: ["nauthera.io"]
  resources: ["clientapprovals"]
  verbs: ["get", "list", "watch"]
{{- end -}}

{{/* The reconciler's rules on cluster-scoped objects, always in its ClusterRole. */}}
{{- define "nauthera-reconciler.clusterRules" -}}
# The security team's ClientPolicies (cluster-scoped), judged before every write. Read only:
# a policy's spec is the security team's.
- apiGroups: ["nauthera.io"]
  resources: ["clientpolicies"]
  verbs: ["get", "list", "watch"]
# What each policy holds back, counted in its status (server-side apply).
- apiGroups: ["nauthera.io"]
  resources: ["clientpolicies/status"]
  verbs: ["get", "patch"]
# A policy's namespaceSelector matches namespace labels.
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
# The ValidatingAdmissionPolicy and binding `nauthera-<policy>` generated from each
# ClientPolicy: written with server-side apply (create and patch), written again when someone
# edits or deletes them, removed when the policy no longer has a rule to check at admission.
# RBAC cannot narrow create (or list and watch) to the generated names, so this covers every
# admission policy; the reconciler only touches those labelled managed-by nauthera-reconciler.
# They are owned by their ClientPolicy without blockOwnerDeletion, so no update on
# clientpolicies/finalizers is needed.
- apiGroups: ["admissionregistration.k8s.io"]
  resources: ["validatingadmissionpolicies", "validatingadmissionpolicybindings"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
{{- end -}}
