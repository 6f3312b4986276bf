package local

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// DevCA is the local platform's development certificate authority,
// created at first start; its key is sealed with the value keyring.
type DevCA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	PEM  string
}

// LoadDevCA returns the installation's development CA, creating it at first
// use. Replicas starting together agree: the first stored key wins, and the
// CA certificate is derived from it.
func LoadDevCA(ctx context.Context, db *store.DB, vault *store.Vault) (*DevCA, error) {
	der, err := vault.InstallationSecret(ctx, "dev-ca-key", func() ([]byte, error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		return x509.MarshalPKCS8PrivateKey(k)
	})
	if err != nil {
		return nil, fmt.Errorf("runs: development CA key: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("runs: development CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("runs: development CA key is not ECDSA")
	}
	certPEM, err := db.InstallationSetting(ctx, "dev-ca-cert", func() (string, error) {
		tpl := &x509.Certificate{
			SerialNumber:          randomSerial(),
			Subject:               pkix.Name{CommonName: "Skali Studio development CA", Organization: []string{"Skali"}},
			NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), // valid under any test clock too
			NotAfter:              time.Now().AddDate(10, 0, 0),
			IsCA:                  true,
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
			BasicConstraintsValid: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
		if err != nil {
			return "", err
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), nil
	})
	if err != nil {
		return nil, fmt.Errorf("runs: development CA certificate: %w", err)
	}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil {
		return nil, errors.New("runs: development CA certificate is malformed")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("runs: development CA certificate: %w", err)
	}
	return &DevCA{Cert: cert, key: key, PEM: certPEM}, nil
}

// Sign issues a 90-day certificate for the CSR's domain.
func (ca *DevCA) Sign(csr *x509.CertificateRequest, domain string, now time.Time) (*platform.IssuedCertificate, error) {
	serial := randomSerial()
	tpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: domain},
		DNSNames:     []string{domain},
		NotBefore:    now.Add(-time.Minute).Truncate(time.Second),
		NotAfter:     now.Add(90 * 24 * time.Hour).Truncate(time.Second),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.Cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return &platform.IssuedCertificate{
		Serial:    hex.EncodeToString(serial.Bytes()),
		NotBefore: tpl.NotBefore,
		NotAfter:  tpl.NotAfter,
		PEM:       string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
	}, nil
}

func randomSerial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
