package faults_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// tcpProxy is a Toxiproxy proxy, used as a library, between a controller
// replica and the API server: TLS passes through it untouched, and it can
// cut every connection, refuse new ones, or swallow all data.
type tcpProxy struct {
	t *testing.T
	p *toxiproxy.Proxy
}

// newTCPProxy starts a proxy on 127.0.0.1 to the test's API server; it is
// stopped when the test ends.
func (cl *cluster) newTCPProxy(name string) *tcpProxy {
	t := cl.t
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", cl.env.Host())
	require.NoError(t, p.Start())
	t.Cleanup(p.Stop)
	return &tcpProxy{t: t, p: p}
}

// Addr is where the proxy listens, 127.0.0.1:port.
func (p *tcpProxy) Addr() string { return p.p.Listen }

// cut closes every connection through the proxy and refuses new ones until
// restore.
func (p *tcpProxy) cut() { p.p.Stop() }

// restore accepts connections again on the same address after cut.
func (p *tcpProxy) restore() { require.NoError(p.t, p.p.Start()) }

// blackhole makes the proxy swallow all data both ways, on the connections
// open and on new ones (which it still accepts), as a partition does: the
// peers see no error, only silence, until their own timeouts.
func (p *tcpProxy) blackhole() {
	for _, stream := range []string{"upstream", "downstream"} {
		_, err := p.p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
			`{"name":"blackhole-%s","type":"timeout","stream":"%s","toxicity":1,"attributes":{"timeout":0}}`, stream, stream)))
		require.NoError(p.t, err)
	}
}

// heal closes the connections the blackhole held, whose data is lost
// (their peers would find them dead after their timeouts), and removes the
// blackhole: every peer reconnects at once. (Removing it first would leave
// some connections open but broken.)
func (p *tcpProxy) heal() {
	p.cut()
	p.p.Toxics.ResetToxics(context.Background())
	p.restore()
}
