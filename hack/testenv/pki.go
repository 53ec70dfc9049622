package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pkiFiles are the paths of everything generatePKI writes. All keys are ECDSA P-256.
type pkiFiles struct {
	servingCA     string
	apiserverCert string
	apiserverKey  string
	// kubeletCert and kubeletKey are kwok's serving certificate (IP 127.0.0.1), signed by the
	// serving CA so the apiserver verifies the "kubelet" it streams exec sessions to.
	kubeletCert  string
	kubeletKey   string
	clientCACert string
	clientCAKey  string
	saPublic     string
	saPrivate    string
	// webhookCA signs webhookClientCert, the certificate the apiserver presents to admission
	// webhooks when run with --webhook-client-cert; a CA of its own, so a webhook that trusts it
	// trusts the apiserver alone, not every user of the cluster.
	webhookCA         string
	webhookClientCert string
	webhookClientKey  string
	// frontProxyCA signs frontProxyClientCert, the certificate the apiserver presents when it
	// proxies a request to an aggregated API server (oz's brokered sessions), with the user in
	// X-Remote-* headers; a CA of its own, as kubeadm makes, so that only the apiserver can
	// vouch for a user that way.
	frontProxyCA         string
	frontProxyClientCert string
	frontProxyClientKey  string
	// clients maps a user name (admin included) to its client certificate and key.
	clients map[string]certPair
}

type certPair struct{ cert, key string }

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// frontProxyClientName is the CN of the apiserver's front-proxy client certificate, and the one
// name --requestheader-allowed-names allows.
const frontProxyClientName = "front-proxy-client"

// Long enough for any test run or local session, short enough to be obviously throwaway.
const validity = 30 * 24 * time.Hour

// pkiPaths is where generatePKI writes each file in dir, for admin and every user.
func pkiPaths(dir string, users []user) *pkiFiles {
	files := &pkiFiles{
		servingCA:     filepath.Join(dir, "serving-ca.crt"),
		apiserverCert: filepath.Join(dir, "apiserver.crt"),
		apiserverKey:  filepath.Join(dir, "apiserver.key"),
		kubeletCert:   filepath.Join(dir, "kubelet.crt"),
		kubeletKey:    filepath.Join(dir, "kubelet.key"),
		clientCACert:  filepath.Join(dir, "client-ca.crt"),
		clientCAKey:   filepath.Join(dir, "client-ca.key"),
		saPrivate:     filepath.Join(dir, "sa.key"),
		saPublic:      filepath.Join(dir, "sa.pub"),
		clients:       map[string]certPair{},

		webhookCA:         filepath.Join(dir, "webhook-client-ca.crt"),
		webhookClientCert: filepath.Join(dir, "webhook-client.crt"),
		webhookClientKey:  filepath.Join(dir, "webhook-client.key"),

		frontProxyCA:         filepath.Join(dir, "front-proxy-ca.crt"),
		frontProxyClientCert: filepath.Join(dir, "front-proxy-client.crt"),
		frontProxyClientKey:  filepath.Join(dir, "front-proxy-client.key"),
	}
	for _, u := range identities(users) {
		files.clients[u.Name] = certPair{filepath.Join(dir, u.Name+".crt"), filepath.Join(dir, u.Name+".key")}
	}
	return files
}

// identities are admin (system:masters) and the test users.
func identities(users []user) []user {
	return append([]user{{Name: "admin", Groups: []string{"system:masters"}}}, users...)
}

// loadOrGeneratePKI reuses the certificates and keys a previous run left in dir, so a
// restarted control plane keeps its clients' kubeconfigs and ServiceAccount tokens valid;
// with none there, it generates them. A partial set is an error rather than a silent mix.
func loadOrGeneratePKI(dir string, users []user) (*pkiFiles, bool, error) {
	files := pkiPaths(dir, users)
	if _, err := os.Stat(files.servingCA); errors.Is(err, os.ErrNotExist) {
		generated, err := generatePKI(dir, users)
		return generated, false, err
	}
	for _, path := range files.all() {
		if _, err := os.Stat(path); err != nil {
			return nil, false, fmt.Errorf("reusing the certificates in %s: %w (restart with the same --user flags, or use a fresh --work-dir)", dir, err)
		}
	}
	return files, true, nil
}

func (f *pkiFiles) all() []string {
	paths := []string{f.servingCA, f.apiserverCert, f.apiserverKey, f.kubeletCert, f.kubeletKey, f.clientCACert, f.clientCAKey, f.saPrivate, f.saPublic,
		f.webhookCA, f.webhookClientCert, f.webhookClientKey, f.frontProxyCA, f.frontProxyClientCert, f.frontProxyClientKey}
	for _, pair := range f.clients {
		paths = append(paths, pair.cert, pair.key)
	}
	return paths
}

func generatePKI(dir string, users []user) (*pkiFiles, error) {
	files := pkiPaths(dir, users)

	servingCA, err := newAuthority("oz-testenv-serving-ca")
	if err != nil {
		return nil, err
	}
	if err := writeCert(files.servingCA, servingCA.cert.Raw); err != nil {
		return nil, err
	}
	err = servingCA.issue(files.apiserverCert, files.apiserverKey, x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")},
	})
	if err != nil {
		return nil, err
	}
	err = servingCA.issue(files.kubeletCert, files.kubeletKey, x509.Certificate{
		Subject:     pkix.Name{CommonName: "kwok-kubelet"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	})
	if err != nil {
		return nil, err
	}

	clientCA, err := newAuthority("oz-testenv-client-ca")
	if err != nil {
		return nil, err
	}
	if err := writeCert(files.clientCACert, clientCA.cert.Raw); err != nil {
		return nil, err
	}
	if err := writeKey(files.clientCAKey, clientCA.key); err != nil {
		return nil, err
	}
	// The apiserver maps a client certificate's CN to the user name and each O to a group.
	for _, u := range identities(users) {
		pair := files.clients[u.Name]
		err := clientCA.issue(pair.cert, pair.key, x509.Certificate{
			Subject:     pkix.Name{CommonName: u.Name, Organization: u.Groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return nil, err
		}
	}

	webhookCA, err := newAuthority("oz-testenv-webhook-client-ca")
	if err != nil {
		return nil, err
	}
	if err := writeCert(files.webhookCA, webhookCA.cert.Raw); err != nil {
		return nil, err
	}
	err = webhookCA.issue(files.webhookClientCert, files.webhookClientKey, x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-webhook-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}

	frontProxyCA, err := newAuthority("oz-testenv-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	if err := writeCert(files.frontProxyCA, frontProxyCA.cert.Raw); err != nil {
		return nil, err
	}
	err = frontProxyCA.issue(files.frontProxyClientCert, files.frontProxyClientKey, x509.Certificate{
		Subject:     pkix.Name{CommonName: frontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(files.saPrivate, saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(files.saPublic, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	return files, nil
}

func newAuthority(name string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

// issue signs a leaf certificate from the given template and writes it and its new key.
func (a *authority) issue(certPath, keyPath string, template x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	template.SerialNumber = serial()
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(validity)
	template.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, &template, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return fmt.Errorf("signing %s: %w", certPath, err)
	}
	if err := writeCert(certPath, der); err != nil {
		return err
	}
	return writeKey(keyPath, key)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // the system's random source is broken; nothing sensible can follow
	}
	return n
}

func writeCert(path string, der []byte) error { return writePEM(path, "CERTIFICATE", der) }

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
