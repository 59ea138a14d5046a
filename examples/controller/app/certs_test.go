package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// selfSigned returns a certificate for name and its key, PEM-encoded.
func selfSigned(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// errorSink is a logr sink that keeps the error lines.
type errorSink struct {
	mu     sync.Mutex
	errors []string
}

func (s *errorSink) Init(logr.RuntimeInfo)          {}
func (s *errorSink) Enabled(int) bool               { return true }
func (s *errorSink) Info(int, string, ...any)       {}
func (s *errorSink) WithValues(...any) logr.LogSink { return s }
func (s *errorSink) WithName(string) logr.LogSink   { return s }

func (s *errorSink) Error(err error, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors = append(s.errors, msg+": "+err.Error())
}

func (s *errorSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.errors)
}

// The reloader serves the files' pair, the new one from the first poll
// after they change; files that cannot be loaded leave the last good pair
// in service, with one error line for as long as they stay as they are.
// In a synctest bubble: the polls come on its fake clock, and
// synctest.Wait returns once the poll has been made.
func TestCertReloader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		write := func(certPEM, keyPEM []byte) {
			t.Helper()
			require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
			require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
		}
		certA, keyA := selfSigned(t, "a.example")
		certB, keyB := selfSigned(t, "b.example")
		certC, keyC := selfSigned(t, "c.example")
		write(certA, keyA)

		r, err := newCertReloader(certFile, keyFile)
		require.NoError(t, err)
		leaf := func() string {
			t.Helper()
			pair, err := r.getCertificate(nil)
			require.NoError(t, err)
			c, err := x509.ParseCertificate(pair.Certificate[0])
			require.NoError(t, err)
			return c.Subject.CommonName
		}
		assert.Equal(t, "a.example", leaf())

		sink := &errorSink{}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.watch(ctx, logr.New(sink))
		}()
		synctest.Wait() // the ticker is set
		poll := func() {
			t.Helper()
			time.Sleep(r.interval)
			synctest.Wait()
		}

		write(certB, keyB)
		assert.Equal(t, "a.example", leaf(), "before the poll")
		poll()
		assert.Equal(t, "b.example", leaf(), "after the poll")

		// A renewal caught between its two writes: C's certificate, B's key.
		require.NoError(t, os.WriteFile(certFile, certC, 0o600))
		poll()
		assert.Equal(t, "b.example", leaf(), "a certificate without its key")
		assert.Equal(t, 1, sink.count(), "errors: %v", sink.errors)
		poll()
		assert.Equal(t, 1, sink.count(), "the same broken pair is logged once: %v", sink.errors)
		require.NoError(t, os.WriteFile(keyFile, keyC, 0o600))
		poll()
		assert.Equal(t, "c.example", leaf(), "the renewal complete")

		write([]byte("not PEM"), keyC)
		poll()
		assert.Equal(t, "c.example", leaf(), "a broken certificate file")
		require.NoError(t, os.Remove(keyFile))
		poll()
		poll()
		assert.Equal(t, "c.example", leaf(), "a missing key file")
		assert.Equal(t, 3, sink.count(), "errors: %v", sink.errors)

		write(certA, keyA)
		poll()
		assert.Equal(t, "a.example", leaf(), "good files again")
		assert.Equal(t, 3, sink.count(), "errors: %v", sink.errors)

		cancel()
		<-done
	})
}
