package testenv

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is what the API server and its clients need: one CA that signs both the
// serving certificate and the client certificates (a test server has no reason
// to keep the two apart), the admin's client certificate, and the key pair
// that signs ServiceAccount tokens.
type pki struct {
	caCert []byte // PEM
	admin  keyPair
}

type keyPair struct {
	cert, key []byte // PEM
}

// File names under the certificate directory, for the API server's flags.
const (
	caFile       = "ca.crt"
	servingCert  = "apiserver.crt"
	servingKey   = "apiserver.key"
	saSigningKey = "sa.key"
	saPublicKey  = "sa.pub"
)

// writePKI generates everything under dir and returns what clients need.
func writePKI(dir string) (*pki, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "taintkit-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	serving, err := leaf(ca, caKey, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	admin, err := leaf(ca, caKey, &x509.Certificate{
		// The group system:masters is bound to cluster-admin and cannot be
		// restricted by RBAC.
		Subject:     pkix.Name{CommonName: "taintkit-testenv-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, err
	}

	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		caFile:       caPEM,
		servingCert:  serving.cert,
		servingKey:   serving.key,
		saSigningKey: saKeyPEM,
		saPublicKey:  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return &pki{caCert: caPEM, admin: *admin}, nil
}

// leaf signs a fresh P-256 key for tmpl with the CA.
func leaf(ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.NotBefore = ca.NotBefore
	tmpl.NotAfter = ca.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := sign(tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: kp}, nil
}

func sign(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, fmt.Errorf("testenv: certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// ServingCertificate returns the API server's serving certificate and key,
// signed by the test CA and valid for 127.0.0.1: a proxy that terminates
// TLS between a client and the server presents it, and the client, which
// trusts the test CA, keeps verifying the server it talks to.
func (e *Env) ServingCertificate() (tls.Certificate, error) {
	dir := filepath.Join(e.dir, "pki")
	return tls.LoadX509KeyPair(filepath.Join(dir, servingCert), filepath.Join(dir, servingKey))
}
