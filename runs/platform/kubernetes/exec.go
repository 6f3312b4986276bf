package kubernetes

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// execProtocol is the API server's websocket exec protocol: each binary
// message starts with its stream's number (execStdin … execStatus), and
// a message [execClose, stream] ends one stream (stdin's end of file).
const execProtocol = "v5.channel.k8s.io"

const (
	execStdin  = 0
	execStdout = 1
	execStderr = 2
	execStatus = 3
	execClose  = 255
)

// ExecError is a command run in a container that did not succeed: its
// exit code (0 when it did not run at all) and the API server's words.
type ExecError struct {
	ExitCode int
	Message  string
}

func (e *ExecError) Error() string { return e.Message }

// Exec runs command in container of pod (namespace ns), as the
// container's user, streaming stdin (nil: none) to it and its standard
// output and error to stdout and stderr, over the API server's websocket
// exec: nothing but the API server is reached, and the bytes are copied
// as they are (a dump, a tar stream). It returns when the command ended:
// nil when it exited 0, an *ExecError with its exit code when not, the
// error of stdin or of a writer when one failed (the command is then
// abandoned: its stdin never sees an end of file). It stops when ctx ends.
func (c *Client) Exec(ctx context.Context, ns, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	q := url.Values{"container": {container}, "stdout": {"true"}, "stderr": {"true"}}
	for _, arg := range command {
		q.Add("command", arg)
	}
	if stdin != nil {
		q.Set("stdin", "true")
	}
	u, err := url.Parse(c.server + KindPod.path(ns, pod) + "/exec?" + q.Encode())
	if err != nil {
		return err
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	d := websocket.Dialer{Subprotocols: []string{execProtocol}, HandshakeTimeout: 30 * time.Second,
		ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10} // no proxy, as the API client itself
	if t, ok := c.http.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		d.TLSClientConfig = t.TLSClientConfig.Clone()
		d.TLSClientConfig.NextProtos = []string{"http/1.1"}
	} else {
		d.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	if c.Impersonate != "" {
		h.Set("Impersonate-User", c.Impersonate)
	}
	c.Requests.Add(1)
	conn, resp, err := d.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			var st struct{ Reason, Message string }
			if json.Unmarshal(data, &st) == nil && st.Message != "" {
				return &StatusError{Code: resp.StatusCode, Reason: st.Reason, Message: st.Message}
			}
			return &StatusError{Code: resp.StatusCode, Message: fmt.Sprintf("the API server refused to run a command in pod %s: %s", pod, resp.Status)}
		}
		return &UnreachableError{Err: err}
	}
	if conn.Subprotocol() != execProtocol {
		conn.Close()
		return fmt.Errorf("the API server does not speak %s (it chose %q): Kubernetes 1.30 or later is needed", execProtocol, conn.Subprotocol())
	}
	defer conn.Close()
	// A failed stdin, or ctx's end, ends the command's stdin first (its
	// process reads an end of file: psql, say, ends without committing);
	// closing the connection alone leaves the process waiting for more.
	// ctx's end then closes the connection: the reads below end with it.
	var wmu sync.Mutex // the connection's writes
	var emu sync.Mutex // stdinErr
	var stdinErr error
	endStdin := func() {
		// Not behind a write that the peer does not read: the close of
		// the connection below ends that one.
		if wmu.TryLock() {
			conn.WriteMessage(websocket.BinaryMessage, []byte{execClose, execStdin})
			wmu.Unlock()
		}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			if stdin != nil {
				endStdin()
			}
			conn.Close()
		case <-done:
		}
	}()
	if stdin != nil {
		go func() {
			// The error is recorded before stdin ends: a process that
			// ends because of that end is never taken for a success.
			if err := pumpStdin(conn, &wmu, stdin); err != nil {
				emu.Lock()
				stdinErr = err
				emu.Unlock()
			}
			wmu.Lock()
			conn.WriteMessage(websocket.BinaryMessage, []byte{execClose, execStdin})
			wmu.Unlock()
		}()
	}
	failed := func(err error) error {
		emu.Lock()
		defer emu.Unlock()
		switch {
		case stdinErr != nil:
			return stdinErr
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		// Messages are copied through one buffer, none kept whole: a
		// dump of any size streams in bounded memory.
		kind, r, err := conn.NextReader()
		if err != nil {
			if websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				return failed(errors.New("the command's stream ended without its exit status"))
			}
			return failed(&UnreachableError{Err: err})
		}
		if kind != websocket.BinaryMessage {
			continue
		}
		if _, err := io.ReadFull(r, buf[:1]); err != nil {
			continue // an empty message
		}
		var w io.Writer
		switch buf[0] {
		case execStdout:
			w = stdout
		case execStderr:
			w = stderr
		case execStatus:
			data, err := io.ReadAll(io.LimitReader(r, 64<<10))
			if err != nil {
				return failed(&UnreachableError{Err: err})
			}
			return failed(execStatusError(data))
		default:
			continue
		}
		for {
			n, rerr := r.Read(buf)
			if n > 0 {
				if _, err := w.Write(buf[:n]); err != nil {
					return err
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return failed(&UnreachableError{Err: rerr})
			}
		}
	}
}

// execMessage is the largest stdin message sent, with room to spare: on
// Kubernetes 1.36 a stdin message over 64 KiB loses what is beyond (one
// of 64 KiB and one byte lost its last byte).
const execMessage = 63 << 10

// pumpStdin copies r to the command's stdin in messages until r ends (nil
// at its end of file, its error else) or the command does.
func pumpStdin(conn *websocket.Conn, mu *sync.Mutex, r io.Reader) error {
	buf := make([]byte, execMessage)
	buf[0] = execStdin
	write := func(msg []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return conn.WriteMessage(websocket.BinaryMessage, msg)
	}
	for {
		n, err := r.Read(buf[1:])
		if n > 0 {
			if werr := write(buf[:1+n]); werr != nil {
				return nil // the command ended: the reader says how
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// execStatusError reads the exit status the API server sends last: nil
// for a success.
func execStatusError(data []byte) error {
	var st struct {
		Status, Reason, Message string
		Details                 struct {
			Causes []struct{ Reason, Message string }
		}
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("the command's exit status cannot be read: %v", err)
	}
	if st.Status == "Success" {
		return nil
	}
	e := &ExecError{Message: st.Message}
	for _, c := range st.Details.Causes {
		if c.Reason == "ExitCode" {
			fmt.Sscan(c.Message, &e.ExitCode)
		}
	}
	if e.Message == "" {
		e.Message = "the command failed (" + st.Reason + ")"
	}
	return e
}
