{{/*
Generated from src/install/rbac/rules.rs by `make manifests`; do not edit by hand.
oz-manager's RBAC rules for each set of parts (`controllers`), with the install's name
written as OZNAME. The reason for every rule is written above it in
config/default/install.yaml; docs/rbac.md explains the design.
*/}}
{{- define "oz.rules.watched.exec" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
{{- end }}
{{- define "oz.rules.state.exec" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.exec" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
{{- end }}
{{- define "oz.rules.watched.pod" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
  - create
  - delete
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/attach
  verbs:
  - get
  - create
{{- end }}
{{- define "oz.rules.state.pod" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.pod" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
{{- end }}
{{- define "oz.rules.watched.exec,pod" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/status
  - podaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/finalizers
  - podaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  - podaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/finalizers
  - podaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
  - create
  - delete
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/attach
  verbs:
  - get
  - create
{{- end }}
{{- define "oz.rules.state.exec,pod" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.exec,pod" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
{{- end }}
{{- define "oz.rules.watched.webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.state.webhooks" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
{{- end }}
{{- define "oz.rules.watched.exec,webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - list
  - watch
{{- end }}
{{- define "oz.rules.state.exec,webhooks" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.exec,webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
{{- end }}
{{- define "oz.rules.watched.pod,webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
  - create
  - delete
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - list
  - watch
{{- end }}
{{- define "oz.rules.state.pod,webhooks" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.pod,webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
{{- end }}
{{- define "oz.rules.watched.exec,pod,webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/status
  - podaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/finalizers
  - podaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  - podaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/finalizers
  - podaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
  - create
  - delete
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/attach
  verbs:
  - get
  - create
{{- end }}
{{- define "oz.rules.state.exec,pod,webhooks" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.exec,pod,webhooks" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
{{- end }}
{{- define "oz.rules.watched.webhooks,sessions" }}
- apiGroups:
  - sessions.wizardofoz.co
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  - podaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.state.webhooks,sessions" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.webhooks,sessions" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
- apiGroups:
  - apiregistration.k8s.io
  resourceNames:
  - v1alpha1.sessions.wizardofoz.co
  resources:
  - apiservices
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - apiregistration.k8s.io
  resources:
  - apiservices
  verbs:
  - create
{{- end }}
{{- define "oz.rules.watched.exec,webhooks,sessions" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - sessions.wizardofoz.co
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  - podaccessrequests/status
  verbs:
  - patch
{{- end }}
{{- define "oz.rules.state.exec,webhooks,sessions" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.exec,webhooks,sessions" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
- apiGroups:
  - apiregistration.k8s.io
  resourceNames:
  - v1alpha1.sessions.wizardofoz.co
  resources:
  - apiservices
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - apiregistration.k8s.io
  resources:
  - apiservices
  verbs:
  - create
{{- end }}
{{- define "oz.rules.watched.pod,webhooks,sessions" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - podaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
  - create
  - delete
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - sessions.wizardofoz.co
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  - podaccessrequests/status
  verbs:
  - patch
{{- end }}
{{- define "oz.rules.state.pod,webhooks,sessions" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.pod,webhooks,sessions" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
- apiGroups:
  - apiregistration.k8s.io
  resourceNames:
  - v1alpha1.sessions.wizardofoz.co
  resources:
  - apiservices
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - apiregistration.k8s.io
  resources:
  - apiservices
  verbs:
  - create
{{- end }}
{{- define "oz.rules.watched.exec,pod,webhooks,sessions" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/status
  - podaccesstemplates/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates/finalizers
  - podaccesstemplates/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/status
  - podaccessrequests/status
  verbs:
  - patch
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests/finalizers
  - podaccessrequests/finalizers
  verbs:
  - update
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accessapprovals
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resourceNames:
  - oz-notifications
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - apps
  resources:
  - deployments
  - statefulsets
  - daemonsets
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - argoproj.io
  resources:
  - rollouts
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - rbac.authorization.k8s.io
  resources:
  - roles
  - rolebindings
  verbs:
  - get
  - list
  - watch
  - create
  - patch
  - delete
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
- apiGroups:
  - ""
  resources:
  - pods
  verbs:
  - get
  - list
  - watch
  - create
  - delete
- apiGroups:
  - ""
  resources:
  - pods/exec
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - sessions.wizardofoz.co
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
- apiGroups:
  - ""
  resources:
  - pods/exec
  - pods/attach
  verbs:
  - get
  - create
{{- end }}
{{- define "oz.rules.state.exec,pod,webhooks,sessions" }}
- apiGroups:
  - coordination.k8s.io
  resourceNames:
  - OZNAME-manager
  resources:
  - leases
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - coordination.k8s.io
  resources:
  - leases
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - OZNAME-webhook-ca
  - OZNAME-webhook-tls
  resources:
  - secrets
  verbs:
  - get
  - list
  - watch
  - update
  - delete
- apiGroups:
  - ""
  resourceNames:
  - oz-audit-signing-key
  resources:
  - secrets
  verbs:
  - get
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - create
- apiGroups:
  - ""
  resourceNames:
  - oz-audit
  resources:
  - configmaps
  verbs:
  - get
  - patch
- apiGroups:
  - ""
  resources:
  - configmaps
  verbs:
  - create
- apiGroups:
  - events.k8s.io
  resources:
  - events
  verbs:
  - create
{{- end }}
{{- define "oz.rules.cluster.exec,pod,webhooks,sessions" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - accesslocks
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  resources:
  - mutatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resourceNames:
  - OZNAME-requests
  - OZNAME-audit
  resources:
  - validatingwebhookconfigurations
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - admissionregistration.k8s.io
  resources:
  - mutatingwebhookconfigurations
  - validatingwebhookconfigurations
  verbs:
  - create
- apiGroups:
  - apiregistration.k8s.io
  resourceNames:
  - v1alpha1.sessions.wizardofoz.co
  resources:
  - apiservices
  verbs:
  - get
  - list
  - watch
  - patch
- apiGroups:
  - apiregistration.k8s.io
  resources:
  - apiservices
  verbs:
  - create
{{- end }}
{{- define "oz.rules.fleetHub" }}
- apiGroups:
  - multicluster.x-k8s.io
  resources:
  - clusterprofiles
  verbs:
  - get
  - list
  - watch
- apiGroups:
  - ""
  resources:
  - secrets
  verbs:
  - get
{{- end }}
{{- define "oz.rules.fleetHubCredential" }}
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccesstemplates
  - podaccesstemplates
  verbs:
  - get
  - list
  - watch
  - create
  - update
  - patch
  - delete
- apiGroups:
  - crds.wizardofoz.co
  resources:
  - execaccessrequests
  - podaccessrequests
  verbs:
  - get
  - list
  - watch
  - create
  - delete
{{- end }}
