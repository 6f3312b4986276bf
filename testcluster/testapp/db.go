package main

// A PostgreSQL client of the smallest kind, from the standard library
// only: the version 3 protocol's startup with trust, password, md5 and
// SCRAM-SHA-256 authentication, TLS as sslmode asks, and simple queries
// whose values are read as text. Enough for the test application's
// release command and its page of rows, and no module for the image.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

func migrate(ctx context.Context) int {
	note := os.Getenv("TESTAPP_NOTE")
	if note == "" {
		note = "migrated"
	}
	c, err := connectWaiting(ctx, 30*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp migrate:", err)
		return 1
	}
	defer c.close()
	// The session as the server sees it: the user, and the TLS version
	// of the connection ("no TLS" without).
	who, err := c.query(`SELECT current_user, coalesce((SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl), 'no TLS')`)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp migrate:", err)
		return 1
	}
	if len(who) == 1 && len(who[0]) == 2 {
		fmt.Printf("testapp migrate: connected as %s, %s\n", who[0][0], who[0][1])
	}
	if _, err := c.query(`CREATE TABLE IF NOT EXISTS testapp_rows (id serial PRIMARY KEY, note text NOT NULL, created timestamptz NOT NULL DEFAULT now())`); err != nil {
		fmt.Fprintln(os.Stderr, "testapp migrate:", err)
		return 1
	}
	if _, err := c.query(`INSERT INTO testapp_rows (note) VALUES ('` + strings.ReplaceAll(note, "'", "''") + `')`); err != nil {
		fmt.Fprintln(os.Stderr, "testapp migrate:", err)
		return 1
	}
	fmt.Println("testapp migrate: table testapp_rows ready, row added:", note)
	return 0
}

// connectWaiting connects, trying again for up to wait while the address
// refuses connections or the name does not resolve yet (as migration tools
// wait for a database that was just made: a Service's rules reach the
// node a moment after its endpoint is ready), saying so; any other error
// (authentication, TLS) ends it at once.
func connectWaiting(ctx context.Context, wait time.Duration) (*pgConn, error) {
	deadline := time.Now().Add(wait)
	said := ""
	for {
		c, err := connect(ctx)
		if err == nil {
			return c, nil
		}
		var dnsErr *net.DNSError
		if !(errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &dnsErr)) || time.Now().After(deadline) {
			return nil, err
		}
		if err.Error() != said {
			said = err.Error()
			fmt.Println("testapp migrate: waiting for the database:", said)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func readRows(ctx context.Context) ([]string, error) {
	c, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.close()
	rows, err := c.query(`SELECT id, note FROM testapp_rows ORDER BY id`)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		out = append(out, strings.Join(r, " "))
	}
	return out, nil
}

type pgConn struct {
	conn net.Conn
	r    *bufio.Reader
}

func (c *pgConn) close() {
	_ = c.send('X', nil)
	c.conn.Close()
}

// connect opens DATABASE_URL (postgres://user:password@host:port/db?sslmode=...).
func connect(ctx context.Context) (*pgConn, error) {
	raw := os.Getenv("DATABASE_URL")
	if raw == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, errors.New("DATABASE_URL is not a postgres:// URL")
	}
	user := u.User.Username()
	password, _ := u.User.Password()
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = user
	}
	q := u.Query()
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	network, address := "tcp", net.JoinHostPort(host, port)
	if h := q.Get("host"); strings.HasPrefix(h, "/") {
		network, address = "unix", h+"/.s.PGSQL."+port
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	sslmode := q.Get("sslmode")
	if sslmode == "" {
		sslmode = "prefer"
	}
	if network == "tcp" && sslmode != "disable" {
		// SSLRequest: length 8, code 80877103.
		if _, err := conn.Write([]byte{0, 0, 0, 8, 4, 210, 22, 47}); err != nil {
			conn.Close()
			return nil, err
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(conn, b); err != nil {
			conn.Close()
			return nil, err
		}
		switch {
		case b[0] == 'S':
			cfg := &tls.Config{ServerName: host, InsecureSkipVerify: sslmode != "verify-full"} // require and verify-ca as libpq without a root file
			tc := tls.Client(conn, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, err
			}
			conn = tc
		case sslmode != "prefer" && sslmode != "allow":
			conn.Close()
			return nil, fmt.Errorf("the server does not accept TLS (sslmode=%s)", sslmode)
		}
	}
	c := &pgConn{conn: conn, r: bufio.NewReader(conn)}
	var start []byte
	start = binary.BigEndian.AppendUint32(start, 196608)
	for _, kv := range [][2]string{{"user", user}, {"database", db}, {"application_name", "testapp"}} {
		start = append(append(append(append(start, kv[0]...), 0), kv[1]...), 0)
	}
	start = append(start, 0)
	if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(start)+4)), start...)); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.authenticate(user, password); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *pgConn) send(t byte, body []byte) error {
	msg := append([]byte{t}, binary.BigEndian.AppendUint32(nil, uint32(len(body)+4))...)
	_, err := c.conn.Write(append(msg, body...))
	return err
}

func (c *pgConn) recv() (byte, []byte, error) {
	h := make([]byte, 5)
	if _, err := io.ReadFull(c.r, h); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n < 4 || n > 64<<20 {
		return 0, nil, errors.New("malformed message from the server")
	}
	body := make([]byte, n-4)
	_, err := io.ReadFull(c.r, body)
	return h[0], body, err
}

// pgError reads an ErrorResponse's severity, code and message.
func pgError(body []byte) error {
	var sev, code, msg string
	for _, f := range strings.Split(string(body), "\x00") {
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case 'S':
			sev = f[1:]
		case 'C':
			code = f[1:]
		case 'M':
			msg = f[1:]
		}
	}
	return fmt.Errorf("%s: %s (SQLSTATE %s)", sev, msg, code)
}

func (c *pgConn) authenticate(user, password string) error {
	var nonce, clientFirstBare string
	var salted []byte
	var authMessage string
	for {
		t, body, err := c.recv()
		if err != nil {
			return err
		}
		switch t {
		case 'E':
			return pgError(body)
		case 'Z':
			return nil
		case 'R':
			if len(body) < 4 {
				return errors.New("malformed authentication request")
			}
			switch kind := binary.BigEndian.Uint32(body); kind {
			case 0: // ok
			case 3: // cleartext
				if err := c.send('p', append([]byte(password), 0)); err != nil {
					return err
				}
			case 5: // md5 with a 4-byte salt
				inner := md5.Sum([]byte(password + user))
				outer := md5.Sum(append([]byte(hex.EncodeToString(inner[:])), body[4:8]...))
				if err := c.send('p', append([]byte("md5"+hex.EncodeToString(outer[:])), 0)); err != nil {
					return err
				}
			case 10: // SASL: mechanisms follow
				if !strings.Contains(string(body[4:]), "SCRAM-SHA-256\x00") {
					return errors.New("the server offers no SASL mechanism this client has (SCRAM-SHA-256)")
				}
				b := make([]byte, 18)
				_, _ = rand.Read(b)
				nonce = base64.RawStdEncoding.EncodeToString(b)
				clientFirstBare = "n=,r=" + nonce
				first := "n,," + clientFirstBare
				msg := append([]byte("SCRAM-SHA-256\x00"), binary.BigEndian.AppendUint32(nil, uint32(len(first)))...)
				if err := c.send('p', append(msg, first...)); err != nil {
					return err
				}
			case 11: // SASL continue: r=, s=, i=
				serverFirst := string(body[4:])
				var r, s string
				var iter int
				for _, kv := range strings.Split(serverFirst, ",") {
					switch {
					case strings.HasPrefix(kv, "r="):
						r = kv[2:]
					case strings.HasPrefix(kv, "s="):
						s = kv[2:]
					case strings.HasPrefix(kv, "i="):
						_, _ = fmt.Sscan(kv[2:], &iter)
					}
				}
				salt, err := base64.StdEncoding.DecodeString(s)
				if err != nil || !strings.HasPrefix(r, nonce) || iter <= 0 {
					return errors.New("malformed SCRAM challenge")
				}
				if salted, err = pbkdf2.Key(sha256.New, password, salt, iter, 32); err != nil {
					return err
				}
				finalNoProof := "c=biws,r=" + r
				authMessage = clientFirstBare + "," + serverFirst + "," + finalNoProof
				clientKey := hmacSum(salted, "Client Key")
				stored := sha256.Sum256(clientKey)
				sig := hmacSum(stored[:], authMessage)
				for i := range clientKey {
					clientKey[i] ^= sig[i]
				}
				if err := c.send('p', []byte(finalNoProof+",p="+base64.StdEncoding.EncodeToString(clientKey))); err != nil {
					return err
				}
			case 12: // SASL final: the server's signature
				want := "v=" + base64.StdEncoding.EncodeToString(hmacSum(hmacSum(salted, "Server Key"), authMessage))
				if !strings.HasPrefix(string(body[4:]), want) {
					return errors.New("the server's SCRAM signature does not match")
				}
			default:
				return fmt.Errorf("authentication method %d is not supported", kind)
			}
		}
	}
}

func hmacSum(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// query runs one simple query and returns its rows' values as text (NULL
// as "NULL").
func (c *pgConn) query(sql string) ([][]string, error) {
	if err := c.send('Q', append([]byte(sql), 0)); err != nil {
		return nil, err
	}
	var rows [][]string
	var qerr error
	for {
		t, body, err := c.recv()
		if err != nil {
			return nil, err
		}
		switch t {
		case 'E':
			qerr = pgError(body)
		case 'D':
			if len(body) < 2 {
				return nil, errors.New("malformed row")
			}
			n := int(binary.BigEndian.Uint16(body))
			p := body[2:]
			row := make([]string, 0, n)
			for i := 0; i < n; i++ {
				if len(p) < 4 {
					return nil, errors.New("malformed row")
				}
				l := int32(binary.BigEndian.Uint32(p))
				p = p[4:]
				if l < 0 {
					row = append(row, "NULL")
					continue
				}
				if int(l) > len(p) {
					return nil, errors.New("malformed row")
				}
				row = append(row, string(p[:l]))
				p = p[l:]
			}
			rows = append(rows, row)
		case 'Z':
			return rows, qerr
		}
	}
}
