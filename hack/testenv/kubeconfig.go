package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

type kubeconfigPaths struct {
	admin string
	// users maps each test user's name to its kubeconfig path.
	users map[string]string
}

// writeKubeconfigs writes DIR/kubeconfig for admin and DIR/users/NAME.kubeconfig per test user,
// each with its certificates embedded so the files can be copied anywhere.
func writeKubeconfigs(dir, server string, pki *pkiFiles, users []user) (*kubeconfigPaths, error) {
	paths := &kubeconfigPaths{admin: filepath.Join(dir, "kubeconfig"), users: map[string]string{}}
	if err := writeKubeconfig(paths.admin, server, pki, "admin"); err != nil {
		return nil, err
	}
	for _, u := range users {
		path := filepath.Join(dir, "users", u.Name+".kubeconfig")
		if err := writeKubeconfig(path, server, pki, u.Name); err != nil {
			return nil, err
		}
		paths.users[u.Name] = path
	}
	return paths, nil
}

func writeKubeconfig(path, server string, pki *pkiFiles, name string) error {
	ca, err := os.ReadFile(pki.servingCA)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(pki.clients[name].cert)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(pki.clients[name].key)
	if err != nil {
		return err
	}
	config := clientcmdapi.NewConfig()
	config.Clusters["oz-testenv"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	config.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	config.Contexts[name+"@oz-testenv"] = &clientcmdapi.Context{Cluster: "oz-testenv", AuthInfo: name, Namespace: "default"}
	config.CurrentContext = name + "@oz-testenv"
	return clientcmd.WriteToFile(*config, path)
}

// writeWebhookClientConfig makes the apiserver present the webhook client certificate to every
// admission webhook: a kubeconfig whose one user is named "*" (the apiserver picks the user by
// the webhook's host:port, then *.domain suffixes, then "*" for any webhook), given as
// kubeConfigFile to both webhook admission plugins in an AdmissionConfiguration. It returns the
// AdmissionConfiguration's path, for --admission-control-config-file.
func writeWebhookClientConfig(dir string, pki *pkiFiles) (string, error) {
	cert, err := os.ReadFile(pki.webhookClientCert)
	if err != nil {
		return "", err
	}
	key, err := os.ReadFile(pki.webhookClientKey)
	if err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	config := clientcmdapi.NewConfig()
	config.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	if err := clientcmd.WriteToFile(*config, kubeconfig); err != nil {
		return "", err
	}
	plugin := func(name string) string {
		return fmt.Sprintf(`- name: %s
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %q
`, name, kubeconfig)
	}
	admission := filepath.Join(dir, "admission-control.yaml")
	text := "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n" +
		plugin("ValidatingAdmissionWebhook") + plugin("MutatingAdmissionWebhook")
	return admission, os.WriteFile(admission, []byte(text), 0o600)
}
