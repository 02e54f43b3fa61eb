// Package kubetest is an API-server stand-in for the kubernetes driver's
// tests, since no cluster can run on these machines (no kubelet image, two
// cores). It serves what the driver asks of an API server: GET of a pod,
// the list of pods by label selector, and the exec and portforward
// subresources, the last two with Kubernetes' own server code on both
// hops:
//
//   - the API server's side is k8s.io/apiserver/pkg/util/proxy: the stream
//     translator serves v5.channel.k8s.io over WebSocket (and speaks SPDY
//     to the kubelet), the tunneling handler serves port-forward's SPDY
//     over WebSocket, and apimachinery's upgrade-aware proxy passes SPDY
//     through, as kube-apiserver wires them for pods/exec and
//     pods/portforward;
//   - the kubelet's side is k8s.io/cri-streaming's remotecommand and
//     portforward handlers, which container runtimes serve;
//
// and behind them real processes: each pod is backed by a Docker
// container (--network none, labelled berth.conversation=<id>), exec'd
// through the Engine API and dialled through the docker enclosure.
//
// The stand-in records the protocol each upgrade negotiated (Negotiated),
// can refuse WebSocket upgrades as an API server without the translator
// does (RefuseWebSockets), and can delete a pod, which removes its
// container (DeletePod).
package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"

	"github.com/berth-dev/berth/enclosure"
	"github.com/berth-dev/berth/enclosure/docker"
	"github.com/berth-dev/berth/enclosure/relay"
	"github.com/berth-dev/berth/enclosure/relayexec"
)

// Negotiation is one upgrade the stand-in's API server answered.
type Negotiation struct {
	Subresource string // "exec" or "portforward"
	// Upgrade is the answer's Upgrade header: "websocket", or "SPDY/3.1".
	Upgrade string
	// Protocol is the subprotocol chosen: Sec-WebSocket-Protocol for
	// WebSocket (v5.channel.k8s.io, SPDY/3.1+portforward.k8s.io),
	// X-Stream-Protocol-Version for SPDY (v4.channel.k8s.io,
	// portforward.k8s.io).
	Protocol string
}

// Server is the stand-in: an API server in front of a kubelet, both
// httptest servers.
type Server struct {
	// URL is the API server's.
	URL string

	api, kubelet *httptest.Server
	docker       *client.Client
	dialer       *docker.Driver
	transport    *http.Transport // the API server's to the kubelet

	mu         sync.Mutex
	pods       map[string]*entry // "namespace/name"
	negotiated []Negotiation
	refuseWS   atomic.Bool
}

type entry struct {
	pod        *corev1.Pod
	containers map[string]string              // container name -> Docker container id
	dialers    map[string]enclosure.Enclosure // container id -> docker enclosure
}

// New starts the stand-in; it stops when the test ends. rel is the relay
// the docker enclosure behind port-forwards installs.
func New(t testing.TB, rel *relay.Binary) *Server {
	t.Helper()
	s, err := Start(rel)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start starts the stand-in, for a program (a benchmark); Close stops it.
func Start(rel *relay.Binary) (*Server, error) {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	s := &Server{
		docker:    cli,
		dialer:    docker.New(docker.Options{Shared: relayexec.Shared{Relay: func() (*relay.Binary, error) { return rel, nil }}}),
		pods:      map[string]*entry{},
		transport: http.DefaultTransport.(*http.Transport).Clone(),
	}
	s.kubelet = httptest.NewServer(s.kubeletMux())
	s.api = httptest.NewServer(s.apiMux())
	s.URL = s.api.URL
	return s, nil
}

// Close stops the servers (the pods' containers are their starters' to
// remove).
func (s *Server) Close() {
	s.api.CloseClientConnections()
	s.api.Close()
	s.kubelet.CloseClientConnections()
	s.kubelet.Close()
	s.transport.CloseIdleConnections()
	s.dialer.Close()
	s.docker.Close()
}

// RestConfig is a client configuration for the stand-in.
func (s *Server) RestConfig() *rest.Config { return &rest.Config{Host: s.URL} }

// Kubeconfig writes a kubeconfig for the stand-in, its context's
// namespace ns, in a directory of the test's, and returns its path.
func (s *Server) Kubeconfig(t testing.TB, ns string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.WriteKubeconfig(p, ns); err != nil {
		t.Fatal(err)
	}
	return p
}

// WriteKubeconfig writes a kubeconfig for the stand-in at path, its
// context's namespace ns.
func (s *Server) WriteKubeconfig(path, ns string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["standin"] = &clientcmdapi.Cluster{Server: s.URL}
	cfg.AuthInfos["berth"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["standin"] = &clientcmdapi.Context{Cluster: "standin", AuthInfo: "berth", Namespace: ns}
	cfg.CurrentContext = "standin"
	return clientcmd.WriteToFile(*cfg, path)
}

// RefuseWebSockets makes the API server refuse (or again accept) the
// upgrade to WebSocket, as one without the stream translator (before
// 1.30) does: the client falls back to SPDY.
func (s *Server) RefuseWebSockets(refuse bool) { s.refuseWS.Store(refuse) }

// Negotiated returns the upgrades answered so far, in order.
func (s *Server) Negotiated() []Negotiation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.negotiated)
}

// Pod is a pod to run: a Docker container behind it.
type Pod struct {
	Namespace    string // "default" when empty
	Name         string
	Container    string // the container's name; "sandbox" when empty
	Conversation string // the berth.conversation label, when not empty
	Image        string
	// Workdir, when not empty, is bind-mounted at MountPath
	// ("/workspace" when empty): the pod's volume "workspace".
	Workdir   string
	MountPath string
	// SubPath, when not empty, is the directory of Workdir mounted
	// instead (the volumeMount's subPath).
	SubPath string
	// More are further mounts of the same volume.
	More []Mount
	// DockerFlags are added to docker run (a test's own label, --user).
	DockerFlags []string
}

// Mount is a further volumeMount of the workspace volume: Workdir's
// directory SubPath at MountPath.
type Mount struct{ SubPath, MountPath string }

// WorkspaceVolume is the name of the volume RunPod mounts the workdir as.
const WorkspaceVolume = "workspace"

// RunPod starts p's container (--network none, sleeping) and serves the
// pod, Running; both go when the test ends. It returns the pod's id as
// the driver takes it: namespace/name.
func (s *Server) RunPod(t testing.TB, p Pod) string {
	t.Helper()
	id, err := s.StartPod(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.DeletePod(id) })
	return id
}

// StartPod is RunPod for a program: DeletePod removes the container.
func (s *Server) StartPod(p Pod) (string, error) {
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	if p.Container == "" {
		p.Container = "sandbox"
	}
	if p.MountPath == "" {
		p.MountPath = "/workspace"
	}
	args := []string{"run", "-d", "--network", "none"}
	lbl := map[string]string{}
	if p.Conversation != "" {
		args = append(args, "--label", enclosure.ConversationLabel+"="+p.Conversation)
		lbl[enclosure.ConversationLabel] = p.Conversation
	}
	k := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: lbl, UID: types.UID("standin-" + p.Name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: p.Container, Image: p.Image}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: p.Container, Image: p.Image, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}},
		},
	}
	if p.Workdir != "" {
		k.Spec.Volumes = []corev1.Volume{{Name: WorkspaceVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		for _, m := range append([]Mount{{p.SubPath, p.MountPath}}, p.More...) {
			args = append(args, "-v", filepath.Join(p.Workdir, m.SubPath)+":"+m.MountPath)
			k.Spec.Containers[0].VolumeMounts = append(k.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: WorkspaceVolume, MountPath: m.MountPath, SubPath: m.SubPath})
		}
	}
	args = append(append(args, p.DockerFlags...), p.Image, "sleep", "infinity")
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, msg)
	}
	id := strings.TrimSpace(string(out))
	s.mu.Lock()
	s.pods[p.Namespace+"/"+p.Name] = &entry{pod: k, containers: map[string]string{p.Container: id}, dialers: map[string]enclosure.Enclosure{}}
	s.mu.Unlock()
	return p.Namespace + "/" + p.Name, nil
}

// ContainerID is the Docker container behind a pod's container.
func (s *Server) ContainerID(id, container string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.pods[id]; e != nil {
		return e.containers[container]
	}
	return ""
}

// PodOf is the pod ("namespace/name") a Docker container is behind; ""
// when none is.
func (s *Server) PodOf(containerID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.pods {
		for _, cid := range e.containers {
			if cid == containerID {
				return id
			}
		}
	}
	return ""
}

// SetPhase changes the phase the API server reports for the pod.
func (s *Server) SetPhase(id string, phase corev1.PodPhase) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.pods[id]; e != nil {
		e.pod.Status.Phase = phase
	}
}

// DeletePod deletes the pod as the API server and the kubelet do: the
// pod is gone from the API at once, then its containers are removed,
// which ends every exec and forward into them.
func (s *Server) DeletePod(id string) {
	s.mu.Lock()
	e := s.pods[id]
	delete(s.pods, id)
	s.mu.Unlock()
	if e == nil {
		return
	}
	for _, cid := range e.containers {
		_ = exec.Command("docker", "rm", "-f", cid).Run()
	}
}

// lookup returns the Docker container behind a pod's container.
func (s *Server) lookup(ns, name, container string) (*entry, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.pods[ns+"/"+name]
	if e == nil {
		return nil, "", false
	}
	if container == "" {
		container = e.pod.Spec.Containers[0].Name
	}
	cid, ok := e.containers[container]
	return e, cid, ok
}

// apiMux serves the API server's paths.
func (s *Server) apiMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods/{name}", func(w http.ResponseWriter, r *http.Request) {
		e, _, _ := s.lookup(r.PathValue("ns"), r.PathValue("name"), "")
		if e == nil {
			writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, r.PathValue("name")))
			return
		}
		s.mu.Lock()
		b, err := json.Marshal(e.pod)
		s.mu.Unlock()
		writeJSON(w, b, err)
	})
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods", func(w http.ResponseWriter, r *http.Request) {
		sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
		if err != nil {
			writeStatus(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		s.mu.Lock()
		for _, e := range s.pods {
			if e.pod.Namespace == r.PathValue("ns") && sel.Matches(labels.Set(e.pod.Labels)) {
				list.Items = append(list.Items, *e.pod.DeepCopy())
			}
		}
		s.mu.Unlock()
		b, err := json.Marshal(list)
		writeJSON(w, b, err)
	})
	mux.HandleFunc("/api/v1/namespaces/{ns}/pods/{name}/exec", s.exec)
	mux.HandleFunc("/api/v1/namespaces/{ns}/pods/{name}/portforward", s.portForward)
	return mux
}

func writeJSON(w http.ResponseWriter, b []byte, err error) {
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	b, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}

// exec is pods/exec as kube-apiserver wires it: the upgrade-aware proxy
// to the kubelet, wrapped so that a WebSocket request for
// v5.channel.k8s.io goes to the stream translator instead.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	q := r.URL.Query()
	container := q.Get("container")
	e, _, ok := s.lookup(ns, name, container)
	if !ok {
		if e == nil {
			writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name))
		} else {
			writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, name)))
		}
		return
	}
	if s.refused(w, r) {
		return
	}
	if container == "" {
		container = e.pod.Spec.Containers[0].Name
	}
	loc := &url.URL{Scheme: "http", Host: s.kubelet.Listener.Addr().String(), Path: "/exec/" + ns + "/" + name + "/" + container}
	kq := url.Values{"command": q["command"]}
	opts := translator.Options{}
	for _, f := range []struct {
		param, kubelet string
		on             *bool
	}{{"stdin", "input", &opts.Stdin}, {"stdout", "output", &opts.Stdout}, {"stderr", "error", &opts.Stderr}, {"tty", "tty", &opts.Tty}} {
		if q.Get(f.param) == "true" || q.Get(f.param) == "1" {
			kq.Set(f.kubelet, "1")
			*f.on = true
		}
	}
	loc.RawQuery = kq.Encode()
	tr := s.transport
	upgrade := proxy.NewUpgradeAwareHandler(loc, tr, false, true, responder{})
	ws := translator.NewStreamTranslatorHandler(loc, tr, 0, opts)
	h := translator.NewTranslatingHandler(upgrade, ws, wsstream.IsWebSocketRequestWithStreamCloseProtocol)
	h.ServeHTTP(s.recorder(w, "exec"), r)
}

// portForward is pods/portforward as kube-apiserver wires it: the
// upgrade-aware proxy, wrapped so that SPDY tunnelled through WebSocket
// goes through the tunneling handler.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	if e, _, _ := s.lookup(ns, name, ""); e == nil {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name))
		return
	}
	if s.refused(w, r) {
		return
	}
	loc := &url.URL{Scheme: "http", Host: s.kubelet.Listener.Addr().String(), Path: "/portForward/" + ns + "/" + name}
	tr := s.transport
	upgrade := proxy.NewUpgradeAwareHandler(loc, tr, false, true, responder{})
	h := translator.NewTranslatingHandler(upgrade, translator.NewTunnelingHandler(upgrade), wsstream.IsWebSocketRequestWithTunnelingProtocol)
	h.ServeHTTP(s.recorder(w, "portforward"), r)
}

// refused answers a WebSocket request with 400 while RefuseWebSockets is
// on: the client's upgrade fails, and it falls back to SPDY.
func (s *Server) refused(w http.ResponseWriter, r *http.Request) bool {
	if !s.refuseWS.Load() || !wsstream.IsWebSocketRequest(r) {
		return false
	}
	http.Error(w, "the stand-in refuses upgrades to WebSocket (RefuseWebSockets)", http.StatusBadRequest)
	return true
}

type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// recorder wraps w so that the upgrade's answer, written to the hijacked
// connection, is recorded.
func (s *Server) recorder(w http.ResponseWriter, sub string) http.ResponseWriter {
	return &hijackRecorder{ResponseWriter: w, record: func(resp *http.Response) {
		n := Negotiation{Subresource: sub, Upgrade: resp.Header.Get("Upgrade"), Protocol: resp.Header.Get("Sec-Websocket-Protocol")}
		if n.Protocol == "" {
			n.Protocol = resp.Header.Get("X-Stream-Protocol-Version")
		}
		s.mu.Lock()
		s.negotiated = append(s.negotiated, n)
		s.mu.Unlock()
	}}
}

type hijackRecorder struct {
	http.ResponseWriter
	record func(*http.Response)
}

func (h *hijackRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	sc := &sniffConn{Conn: conn, record: h.record}
	return sc, bufio.NewReadWriter(brw.Reader, bufio.NewWriter(sc)), nil
}

// sniffConn reads the head of the first answer written to it (the 101
// and its headers) and records it.
type sniffConn struct {
	net.Conn
	record func(*http.Response)
	head   []byte
	done   bool
}

func (c *sniffConn) Write(b []byte) (int, error) {
	if !c.done {
		c.head = append(c.head, b...)
		if i := bytes.Index(c.head, []byte("\r\n\r\n")); i >= 0 || len(c.head) > 16<<10 {
			c.done = true
			if resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(c.head)), nil); err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
				c.record(resp)
			}
			c.head = nil
		}
	}
	return c.Conn.Write(b)
}

// idleTimeout and streamCreationTimeout are the kubelet's defaults.
const (
	idleTimeout           = 4 * time.Hour
	streamCreationTimeout = remotecommand.DefaultStreamCreationTimeout
)

// kubeletMux serves the paths the kubelet (a container runtime's
// streaming server) serves, with its handlers.
func (s *Server) kubeletMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{ns}/{name}/{container}", func(w http.ResponseWriter, r *http.Request) {
		opts, err := remotecommand.NewOptions(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		remotecommand.ServeExec(w, r, executor{s}, r.PathValue("ns")+"/"+r.PathValue("name"), "", r.PathValue("container"),
			r.URL.Query()["command"], opts, idleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
	})
	mux.HandleFunc("/portForward/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		portforward.ServePortForward(w, r, forwarder{s}, r.PathValue("ns")+"/"+r.PathValue("name"), "", nil,
			idleTimeout, streamCreationTimeout, []string{portforward.ProtocolV1Name})
	})
	return mux
}

// executor runs an exec in the pod's Docker container through the Engine
// API, as a container runtime runs it in its container.
type executor struct{ s *Server }

func (x executor) ExecInContainer(ctx context.Context, pod, _, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	ns, name, _ := strings.Cut(pod, "/")
	_, cid, ok := x.s.lookup(ns, name, container)
	if !ok {
		return fmt.Errorf("pod %s has no container %s (any more)", pod, container)
	}
	cli := x.s.docker
	created, err := cli.ExecCreate(ctx, cid, client.ExecCreateOptions{
		AttachStdin: in != nil, AttachStdout: true, AttachStderr: true, TTY: tty, Cmd: cmd,
	})
	if err != nil {
		return err
	}
	att, err := cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return err
	}
	defer att.Close()
	if in != nil {
		go func() {
			_, _ = io.Copy(att.Conn, in)
			_ = att.CloseWrite()
		}()
	}
	if _, err := stdcopy.StdCopy(orDiscard(out), orDiscard(errOut), att.Reader); err != nil {
		return err
	}
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		res, err := cli.ExecInspect(context.WithoutCancel(ctx), created.ID, client.ExecInspectOptions{})
		if err != nil {
			return err
		}
		if !res.Running {
			if res.ExitCode != 0 {
				return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", res.ExitCode), Code: res.ExitCode}
			}
			return nil
		}
		time.Sleep(wait)
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// forwarder connects a port-forward's data stream to the port on the
// pod's loopback through the docker enclosure's Dial (an exec of the
// relay's dial: the containers have no network).
type forwarder struct{ s *Server }

func (f forwarder) PortForward(ctx context.Context, pod, _ string, port int32, stream io.ReadWriteCloser) error {
	ns, name, _ := strings.Cut(pod, "/")
	e, cid, ok := f.s.lookup(ns, name, "")
	if !ok {
		return fmt.Errorf("pod %s is gone", pod)
	}
	f.s.mu.Lock()
	enc := e.dialers[cid]
	f.s.mu.Unlock()
	if enc == nil {
		var err error
		if enc, err = f.s.dialer.Attach(ctx, cid); err != nil {
			return err
		}
		f.s.mu.Lock()
		e.dialers[cid] = enc
		f.s.mu.Unlock()
	}
	conn, err := enc.Dial(ctx, int(port))
	if err != nil {
		return err
	}
	defer conn.Close()
	back := make(chan struct{})
	go func() {
		_, _ = io.Copy(stream, conn)
		close(back)
	}()
	go func() {
		_, _ = io.Copy(conn, stream)
		conn.Close()
	}()
	// Either end closing ends the forward (the client closes its data
	// stream only when it is done with the connection).
	<-back
	conn.Close()
	return nil
}
