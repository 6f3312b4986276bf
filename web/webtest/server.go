package webtest

import (
	"net"
	"net/http"
	"net/http/httptest"
)

type httptestServer = httptest.Server

// newServer starts an httptest.Server whose handler is built once its URL
// is known (the handler needs its own public URL).
func newServer(build func(base string) http.Handler) *httptest.Server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("webtest: listen: " + err.Error())
	}
	srv := httptest.NewUnstartedServer(build("http://" + l.Addr().String()))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	return srv
}
