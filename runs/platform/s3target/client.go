package s3target

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Client is a small S3 client on net/http, signing every request with AWS
// Signature Version 4: the operations a backup target needs (objects,
// listing, multipart uploads) and nothing else. Errors never carry the
// credentials: a request's error names the operation, the HTTP status and
// the S3 error code.
type Client struct {
	endpoint  *url.URL
	region    string
	bucket    string
	pathStyle bool
	access    string
	secret    string
	http      *http.Client
	now       func() time.Time
}

// NewClient returns a client of bucket at endpoint (http:// or https://,
// no path) in region; pathStyle puts the bucket in the path
// (endpoint/bucket/key) instead of the host name (bucket.endpoint/key).
func NewClient(endpoint, region, bucket string, pathStyle bool, access, secret string) (*Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, errors.New("the endpoint must be a URL such as https://s3.example.com (scheme and host, no path)")
	}
	u.Path = ""
	tr := &http.Transport{
		Proxy:                 nil, // loopback and private endpoints are reached directly
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       60 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &Client{endpoint: u, region: region, bucket: bucket, pathStyle: pathStyle, access: access, secret: secret,
		http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		now:  time.Now}, nil
}

// DialVia sends every connection of the client to addr, whatever host
// the request names: for tests of virtual-hosted addressing on loopback
// (BUCKET.domain resolves nowhere).
func (c *Client) DialVia(addr string) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	c.http.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Error is an S3 error answer (or a request that got none).
type Error struct {
	Op     string
	Status int
	// Code is the S3 error code (NoSuchBucket, SignatureDoesNotMatch, ...);
	// for a HEAD, which has no body, one derived from the status.
	Code string
	// Err is the transport's error when no answer came.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Op + ": " + e.Err.Error()
	}
	return fmt.Sprintf("%s: %d %s", e.Op, e.Status, e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode is err's S3 error code, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { c := ErrorCode(err); return c == "NoSuchKey" || c == "NotFound" }

// objectURL is the URL of key (or of the bucket when key is "") with query.
func (c *Client) objectURL(key string, query url.Values) *url.URL {
	u := *c.endpoint
	p := "/" + key
	if c.pathStyle {
		p = "/" + c.bucket + p
		if key == "" {
			p = "/" + c.bucket
		}
	} else {
		u.Host = c.bucket + "." + u.Host
	}
	u.Path = p
	u.RawPath = escapePath(p)
	u.RawQuery = canonicalQuery(query)
	return &u
}

// escapePath is SigV4's URI encoding of a path: every byte but the
// unreserved characters and '/' is percent-encoded.
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		ch := p[i]
		if ch == '/' || unreserved(ch) {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

func escapeQuery(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if unreserved(s[i]) {
			b.WriteByte(s[i])
		} else {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
	}
	return b.String()
}

func unreserved(ch byte) bool {
	return 'A' <= ch && ch <= 'Z' || 'a' <= ch && ch <= 'z' || '0' <= ch && ch <= '9' || ch == '-' || ch == '_' || ch == '.' || ch == '~'
}

// canonicalQuery is the query sorted by name, both parts URI-encoded.
func canonicalQuery(q url.Values) string {
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, escapeQuery(k)+"="+escapeQuery(v))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "&")
}

const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// sign adds SigV4's headers to req, whose body hashes to payloadHash.
func (c *Client) sign(req *http.Request, payloadHash string) {
	t := c.now().UTC()
	amzDate := t.Format("20060102T150405Z")
	day := t.Format("20060102")
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	names := []string{"host"}
	for k := range req.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") || lk == "content-type" || lk == "content-md5" {
			names = append(names, lk)
		}
	}
	slices.Sort(names)
	var canon strings.Builder
	canon.WriteString(req.Method + "\n" + req.URL.EscapedPath() + "\n" + req.URL.RawQuery + "\n")
	for _, n := range names {
		v := req.Host
		if v == "" {
			v = req.URL.Host
		}
		if n != "host" {
			v = strings.Join(req.Header.Values(n), ",")
		}
		canon.WriteString(n + ":" + strings.TrimSpace(v) + "\n")
	}
	signed := strings.Join(names, ";")
	canon.WriteString("\n" + signed + "\n" + payloadHash)
	scope := day + "/" + c.region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canon.String()))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+c.secret), day)
	key = hmacSHA256(key, c.region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+c.access+"/"+scope+", SignedHeaders="+signed+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// retries is how many times a request that failed for a passing reason
// (the storage busy or failing, a connection cut) is sent again, after
// retryWait, then twice as long.
const retries = 3

var retryWait = 250 * time.Millisecond

// do sends one signed request with body (nil for none) and returns the
// answer when its status is 2xx; otherwise the S3 error, its body read.
// Every request the client sends is idempotent (a part or an object is
// sent whole again), so one that failed for a passing reason is retried.
func (c *Client) do(ctx context.Context, op, method, key string, query url.Values, body []byte, header http.Header) (*http.Response, error) {
	wait := retryWait
	for attempt := 0; ; attempt++ {
		resp, err := c.once(ctx, op, method, key, query, body, header)
		if err == nil || attempt == retries || !passing(err) || ctx.Err() != nil {
			return resp, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// passing reports whether err may go away when the request is sent again:
// the storage answered 5xx, SlowDown or RequestTimeout, or a connection
// was cut (not refused: an endpoint that cannot be reached says so at once).
func passing(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	if e.Err != nil {
		var op *net.OpError
		return !(errors.As(e.Err, &op) && op.Op == "dial") && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded)
	}
	return e.Status >= 500 || e.Code == "SlowDown" || e.Code == "RequestTimeout"
}

// once sends a request one time.
func (c *Client) once(ctx context.Context, op, method, key string, query url.Values, body []byte, header http.Header) (*http.Response, error) {
	u := c.objectURL(key, query)
	var rd io.Reader
	hash := emptySHA256
	if body != nil {
		rd = bytes.NewReader(body)
		s := sha256.Sum256(body)
		hash = hex.EncodeToString(s[:])
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, &Error{Op: op, Err: err}
	}
	req.URL = u
	if body != nil {
		req.ContentLength = int64(len(body))
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	c.sign(req, hash)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &Error{Op: op, Err: transportError(err)}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readError(op, method, resp)
}

// transportError is err without the request's URL repeated (it is the
// endpoint and key, never a credential, but long).
func transportError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// readError reads an S3 error document.
func readError(op, method string, resp *http.Response) error {
	var doc struct {
		Code string `xml:"Code"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = xml.Unmarshal(b, &doc)
	e := &Error{Op: op, Status: resp.StatusCode, Code: doc.Code}
	if e.Code == "" {
		switch resp.StatusCode {
		case http.StatusNotFound:
			e.Code = "NotFound"
		case http.StatusForbidden:
			e.Code = "AccessDenied"
		case http.StatusMovedPermanently, http.StatusTemporaryRedirect:
			e.Code = "PermanentRedirect"
		default:
			e.Code = http.StatusText(resp.StatusCode)
		}
	}
	return e
}

// Put writes data to key in one request.
func (c *Client) Put(ctx context.Context, key string, data []byte) error {
	resp, err := c.do(ctx, "PUT "+key, http.MethodPut, key, nil, data, nil)
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// Get opens key for reading; the caller closes it.
func (c *Client) Get(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	resp, err := c.do(ctx, "GET "+key, http.MethodGet, key, nil, nil, nil)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// Head returns key's size.
func (c *Client) Head(ctx context.Context, key string) (int64, error) {
	resp, err := c.do(ctx, "HEAD "+key, http.MethodHead, key, nil, nil, nil)
	if err != nil {
		return 0, err
	}
	drain(resp)
	return resp.ContentLength, nil
}

// Delete removes key (a missing key is no error, as in S3).
func (c *Client) Delete(ctx context.Context, key string) error {
	resp, err := c.do(ctx, "DELETE "+key, http.MethodDelete, key, nil, nil, nil)
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

// CreateBucket creates the client's bucket (for tests and tools).
func (c *Client) CreateBucket(ctx context.Context) error {
	resp, err := c.do(ctx, "create bucket", http.MethodPut, "", nil, nil, nil)
	if err != nil {
		return err
	}
	drain(resp)
	return nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// Object is one listed object.
type Object struct {
	Key  string
	Size int64
}

// List returns every object whose key starts with prefix (ListObjectsV2,
// page after page), at most limit of them (0: no limit).
func (c *Client) List(ctx context.Context, prefix string, limit int) ([]Object, error) {
	var out []Object
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		resp, err := c.do(ctx, "list "+prefix, http.MethodGet, "", q, nil, nil)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Contents []struct {
				Key  string `xml:"Key"`
				Size int64  `xml:"Size"`
			} `xml:"Contents"`
			IsTruncated           bool   `xml:"IsTruncated"`
			NextContinuationToken string `xml:"NextContinuationToken"`
		}
		err = decodeXML(resp, &doc)
		if err != nil {
			return nil, &Error{Op: "list " + prefix, Err: err}
		}
		for _, o := range doc.Contents {
			out = append(out, Object{Key: o.Key, Size: o.Size})
			if limit > 0 && len(out) >= limit {
				return out, nil
			}
		}
		if !doc.IsTruncated || doc.NextContinuationToken == "" {
			return out, nil
		}
		token = doc.NextContinuationToken
	}
}

func decodeXML(resp *http.Response, v any) error {
	defer drain(resp)
	return xml.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v)
}

// CreateMultipart starts a multipart upload of key and returns its id.
func (c *Client) CreateMultipart(ctx context.Context, key string) (string, error) {
	resp, err := c.do(ctx, "start upload of "+key, http.MethodPost, key, url.Values{"uploads": {""}}, nil, nil)
	if err != nil {
		return "", err
	}
	var doc struct {
		UploadID string `xml:"UploadId"`
	}
	if err := decodeXML(resp, &doc); err != nil || doc.UploadID == "" {
		return "", &Error{Op: "start upload of " + key, Err: errors.New("the answer names no upload")}
	}
	return doc.UploadID, nil
}

// Part is an uploaded part of a multipart upload.
type Part struct {
	Number int
	ETag   string
}

// UploadPart uploads part n (from 1) of an upload.
func (c *Client) UploadPart(ctx context.Context, key, uploadID string, n int, data []byte) (Part, error) {
	q := url.Values{"partNumber": {strconv.Itoa(n)}, "uploadId": {uploadID}}
	resp, err := c.do(ctx, fmt.Sprintf("upload part %d of %s", n, key), http.MethodPut, key, q, data, nil)
	if err != nil {
		return Part{}, err
	}
	drain(resp)
	return Part{Number: n, ETag: resp.Header.Get("ETag")}, nil
}

// CompleteMultipart makes the upload's parts the object key.
func (c *Client) CompleteMultipart(ctx context.Context, key, uploadID string, parts []Part) error {
	type xpart struct {
		PartNumber int    `xml:"PartNumber"`
		ETag       string `xml:"ETag"`
	}
	doc := struct {
		XMLName xml.Name `xml:"CompleteMultipartUpload"`
		Parts   []xpart  `xml:"Part"`
	}{}
	for _, p := range parts {
		doc.Parts = append(doc.Parts, xpart{p.Number, p.ETag})
	}
	body, _ := xml.Marshal(doc)
	op := "complete upload of " + key
	resp, err := c.do(ctx, op, http.MethodPost, key, url.Values{"uploadId": {uploadID}}, body, http.Header{"Content-Type": {"application/xml"}})
	if err != nil {
		return err
	}
	// A complete can fail after its 200: the error is in the body.
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	var res struct {
		XMLName xml.Name
		Code    string `xml:"Code"`
	}
	if xml.Unmarshal(b, &res) == nil && res.XMLName.Local == "Error" {
		return &Error{Op: op, Status: resp.StatusCode, Code: res.Code}
	}
	return nil
}

// AbortMultipart abandons an upload and its parts.
func (c *Client) AbortMultipart(ctx context.Context, key, uploadID string) error {
	resp, err := c.do(ctx, "abort upload of "+key, http.MethodDelete, key, url.Values{"uploadId": {uploadID}}, nil, nil)
	if err != nil {
		if c := ErrorCode(err); c == "NoSuchUpload" {
			return nil
		}
		return err
	}
	drain(resp)
	return nil
}

// Upload is a multipart upload in progress.
type Upload struct {
	Key      string
	UploadID string
}

// ListMultipart returns the uploads in progress under prefix (at most the
// first 1,000).
func (c *Client) ListMultipart(ctx context.Context, prefix string) ([]Upload, error) {
	resp, err := c.do(ctx, "list uploads under "+prefix, http.MethodGet, "", url.Values{"uploads": {""}, "prefix": {prefix}}, nil, nil)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Uploads []struct {
			Key      string `xml:"Key"`
			UploadID string `xml:"UploadId"`
		} `xml:"Upload"`
	}
	if err := decodeXML(resp, &doc); err != nil {
		return nil, &Error{Op: "list uploads under " + prefix, Err: err}
	}
	var out []Upload
	for _, u := range doc.Uploads {
		if strings.HasPrefix(u.Key, prefix) {
			out = append(out, Upload{Key: u.Key, UploadID: u.UploadID})
		}
	}
	return out, nil
}
