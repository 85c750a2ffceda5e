package conformance

// Pod logs, as a kubelet would serve them through the API server: each container's output is kept with a
// timestamp per line, and requests for `/api/v1/namespaces/<ns>/pods/<pod>/log` are answered from it by the
// suite's REST transport (the API server has no kubelet to ask). The suite reads them in the mirror tests.

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// timestampedLog writes each line it is given to a file, prefixed with the time it arrived (RFC 3339).
type timestampedLog struct {
	mu      sync.Mutex
	file    *os.File
	pending []byte
}

func (l *timestampedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, p...)
	for {
		end := bytes.IndexByte(l.pending, '\n')
		if end < 0 {
			return len(p), nil
		}
		line := l.pending[:end+1]
		if _, err := l.file.WriteString(time.Now().UTC().Format(time.RFC3339Nano) + " " + string(line)); err != nil {
			return 0, err
		}
		l.pending = l.pending[end+1:]
	}
}

// podLogPath matches the pod log endpoint.
var podLogPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$`)

// podLogs answers pod log requests from the harness's files and passes every other request on.
type podLogs struct {
	next    http.RoundTripper
	workDir string
}

func (p podLogs) RoundTrip(req *http.Request) (*http.Response, error) {
	match := podLogPath.FindStringSubmatch(req.URL.Path)
	if req.Method != http.MethodGet || match == nil {
		return p.next.RoundTrip(req)
	}
	query := req.URL.Query()
	file := filepath.Join(podLogDir(p.workDir, client.ObjectKey{Namespace: match[1], Name: match[2]}), query.Get("container")+".log")
	var since time.Time
	if value := query.Get("sinceTime"); value != "" {
		since, _ = time.Parse(time.RFC3339, value)
	}
	withTimestamps := query.Get("timestamps") == "true"
	var body strings.Builder
	if f, err := os.Open(file); err == nil {
		scanner := bufio.NewScanner(f)
		for scanner.Scan() {
			stamp, line, _ := strings.Cut(scanner.Text(), " ")
			at, err := time.Parse(time.RFC3339Nano, stamp)
			if err != nil || at.Before(since) {
				continue
			}
			if withTimestamps {
				body.WriteString(stamp + " ")
			}
			body.WriteString(line + "\n")
		}
		f.Close()
	} else {
		return &http.Response{
			StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader("no such container log")), Request: req,
		}, nil
	}
	return &http.Response{
		StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader(body.String())), ContentLength: int64(body.Len()), Request: req,
	}, nil
}
