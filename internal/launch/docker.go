package launch

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Docker is a client of the local Docker engine.
type Docker struct{ cli *client.Client }

var (
	dockerOnce sync.Once
	docker     *Docker
	dockerErr  error
)

func newClient() (*client.Client, error) {
	return client.New(client.FromEnv, client.WithAPIVersionNegotiation())
}

// Connect returns this process's client of the Docker engine, or why there
// is none. The first call also removes leftovers of dead processes.
func Connect(ctx context.Context) (*Docker, error) {
	dockerOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		cli, err := newClient()
		if err != nil {
			dockerErr = err
			return
		}
		if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
			cli.Close()
			dockerErr = err
			return
		}
		removeLeftovers(ctx, cli)
		docker = &Docker{cli: cli}
	})
	return docker, dockerErr
}

// A Container is one started container.
type Container struct {
	ID   string
	Spec Spec
	d    *Docker

	mu    sync.Mutex
	addrs map[string]netip.Addr // by network ID: the address before Disconnect
}

// Run creates and starts a container of sp, without waiting for its
// servers (see [Container.Ready]). On error the container, if one was made,
// is already removed.
func (d *Docker) Run(ctx context.Context, sp Spec) (_ *Container, err error) {
	startWatchdog()
	cfg := &container.Config{
		Image:        sp.Image,
		Entrypoint:   sp.Entrypoint,
		Cmd:          sp.Cmd,
		Env:          sp.Env,
		Labels:       labels(),
		ExposedPorts: network.PortSet{},
	}
	hc := &container.HostConfig{PortBindings: network.PortMap{}, ExtraHosts: sp.ExtraHosts, Binds: sp.Binds}
	for _, dir := range sp.Data {
		if !bound(sp.Binds, dir) {
			if cfg.Volumes == nil {
				cfg.Volumes = map[string]struct{}{}
			}
			cfg.Volumes[dir] = struct{}{} // removed with the container
		}
	}
	for _, s := range sp.Services {
		// Published on loopback only, under the number the server listens
		// on (see the package doc, Addresses).
		p := network.MustParsePort(strconv.Itoa(s.Port) + "/tcp")
		cfg.ExposedPorts[p] = struct{}{}
		hc.PortBindings[p] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(s.Port)}}
	}
	r, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "locker-test-" + sp.Kind + "-" + RandomID(4), Config: cfg, HostConfig: hc,
	})
	if err != nil {
		return nil, fmt.Errorf("create %s container: %w", sp.Kind, err)
	}
	c := &Container{ID: r.ID, Spec: sp, d: d}
	defer func() {
		if err != nil {
			c.Remove(context.WithoutCancel(ctx))
		}
	}()
	if len(sp.Files) > 0 {
		if err := c.copyFiles(ctx, sp.Files); err != nil {
			return nil, fmt.Errorf("%s: copy files: %w", sp.Kind, err)
		}
	}
	if sp.Network != nil {
		// The default bridge carries the published ports, the private
		// network the peer traffic: Disconnect cuts only the latter.
		if err := c.Connect(ctx, sp.Network); err != nil {
			return nil, fmt.Errorf("%s: %w", sp.Kind, err)
		}
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start %s container: %w%s", sp.Kind, err, c.LogTail())
	}
	return c, nil
}

// bound reports whether one of binds mounts a host directory at dir.
func bound(binds []string, dir string) bool {
	for _, b := range binds {
		if _, rest, ok := strings.Cut(b, ":"); ok {
			if target, _, _ := strings.Cut(rest, ":"); path.Clean(target) == path.Clean(dir) {
				return true
			}
		}
	}
	return false
}

// copyFiles writes files into the container, making their directories.
func (c *Container) copyFiles(ctx context.Context, files map[string]File) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// Directories first, parents before children, then the files.
	var dirs, names []string
	seen := map[string]bool{}
	for name := range files {
		if !path.IsAbs(name) {
			return fmt.Errorf("file %q: want an absolute path", name)
		}
		names = append(names, name)
		for d := path.Dir(strings.TrimPrefix(path.Clean(name), "/")); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	slices.Sort(dirs) // a parent sorts before its children
	slices.Sort(names)
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, name := range names {
		f := files[name]
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		rel := strings.TrimPrefix(path.Clean(name), "/")
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: mode, Size: int64(len(f.Data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := c.d.cli.CopyToContainer(ctx, c.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: &buf})
	return err
}

// Start starts the container again after Kill. It keeps its filesystem.
func (c *Container) Start(ctx context.Context) error {
	_, err := c.d.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
	return err
}

// Ready waits until every server of the container answers its probe and
// returns their versions, in the order of Spec.Services.
func (c *Container) Ready(ctx context.Context) ([]string, error) {
	versions := make([]string, len(c.Spec.Services))
	for i, s := range c.Spec.Services {
		v, err := s.Ready(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w%s", s.Kind, err, c.LogTail())
		}
		versions[i] = v
	}
	return versions, nil
}

// pauseAttempts bounds the tries of one Pause.
const pauseAttempts = 4

// Pause freezes every process of the container (the cgroup freezer: like
// SIGSTOP, unnoticeable to the process).
func (c *Container) Pause(ctx context.Context) error {
	// The freezer gives up when a task will not stop in time ("unable to
	// freeze"), which happens on a loaded machine; it says nothing about
	// the server, so try again a few times.
	if paused, err := c.paused(ctx); err != nil || paused {
		return err
	}
	var err error
	for attempt := range pauseAttempts {
		if _, err = c.d.cli.ContainerPause(ctx, c.ID, client.ContainerPauseOptions{}); err == nil || !strings.Contains(err.Error(), "unable to freeze") {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	return err
}

// Unpause lets a paused container run on.
func (c *Container) Unpause(ctx context.Context) error {
	if paused, err := c.paused(ctx); err != nil || !paused {
		return err
	}
	_, err := c.d.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
	return err
}

// paused reports whether the container is paused: Pause and Unpause of a
// container already so do nothing, for a call that reported an error may
// have done its work, and is retried.
func (c *Container) paused(ctx context.Context) (bool, error) {
	r, err := c.d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return false, err
	}
	return r.Container.State != nil && r.Container.State.Paused, nil
}

// Kill SIGKILLs the container's processes and returns once it has stopped;
// a stopped container stays as it is (a Kill that reported an error may
// have done its work, and is retried).
func (c *Container) Kill(ctx context.Context) error {
	// A frozen process cannot die; a paused container must be killable too.
	c.d.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
	for killed := false; ; {
		r, err := c.d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return err
		}
		if r.Container.State == nil || !r.Container.State.Running {
			return nil
		}
		if !killed {
			if _, err := c.d.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
				return err
			}
			killed = true
			continue
		}
		select {
		case <-ctx.Done():
			return errors.New("still running")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Remove removes the container whatever its state.
func (c *Container) Remove(ctx context.Context) error {
	return removeContainer(ctx, c.d.cli, c.ID)
}

// errNotOnNetwork says a container has no endpoint on a network.
var errNotOnNetwork = errors.New("has no address on network")

// Endpoint returns the container's address and its gateway on network name
// ("bridge" for the default).
func (c *Container) Endpoint(ctx context.Context, name string) (ip, gateway netip.Addr, err error) {
	r, err := c.d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		return ip, gateway, err
	}
	ep := r.Container.NetworkSettings.Networks[name]
	if ep == nil || !ep.IPAddress.IsValid() {
		return ip, gateway, fmt.Errorf("%s container %w %s", c.Spec.Kind, errNotOnNetwork, name)
	}
	return ep.IPAddress, ep.Gateway, nil
}

// Exec runs cmd in the container and returns its exit code and output.
func (c *Container) Exec(ctx context.Context, cmd ...string) (int, string, error) {
	e, err := c.d.cli.ExecCreate(ctx, c.ID, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, "", err
	}
	a, err := c.d.cli.ExecAttach(ctx, e.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, "", err
	}
	var out bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &out, a.Reader)
	a.Close()
	if err != nil {
		return 0, out.String(), err
	}
	r, err := c.d.cli.ExecInspect(ctx, e.ID, client.ExecInspectOptions{})
	return r.ExitCode, out.String(), err
}

// LogTail returns the end of the container's output, for error messages,
// after a line break.
func (c *Container) LogTail() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.d.cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "40"})
	if err != nil {
		return "\n(no log: " + err.Error() + ")"
	}
	defer r.Close()
	var b bytes.Buffer
	stdcopy.StdCopy(&b, &b, io.LimitReader(r, 64<<10))
	return fmt.Sprintf("\nlast lines of the %s container's log:\n%s", c.Spec.Kind, tail(b.Bytes(), 2000))
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// A Network is a private network of containers, such as a cluster's.
type Network struct {
	ID, Name string
	d        *Docker
}

// NewNetwork creates a bridge network whose subnet counts as configured by
// the user, so that a container re-attached by Connect gets back the
// address it had: docker hands a freed address to whoever asks next, and
// two members re-attached in the other order would swap addresses, which
// peers that dialled by address (etcd's open streams, Redis Cluster) do
// not recover from for minutes. The subnet is the one docker's own pool
// picked (so it clashes with no route of the machine), claimed by
// recreating the network with it; another process that takes it in
// between makes this try again.
func (d *Docker) NewNetwork(ctx context.Context) (*Network, error) {
	startWatchdog()
	var err error
	for range 5 {
		var n *Network
		if n, err = d.newNetwork(ctx); err == nil {
			return n, nil
		}
	}
	return nil, fmt.Errorf("create network: %w", err)
}

func (d *Docker) newNetwork(ctx context.Context) (*Network, error) {
	name := "locker-test-" + RandomID(6)
	opts := client.NetworkCreateOptions{Driver: "bridge", Labels: labels()}
	r, err := d.cli.NetworkCreate(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	n := &Network{ID: r.ID, Name: name, d: d}
	in, err := d.cli.NetworkInspect(ctx, r.ID, client.NetworkInspectOptions{})
	if err != nil {
		n.Remove(context.WithoutCancel(ctx))
		return nil, err
	}
	var ipam []network.IPAMConfig
	for _, c := range in.Network.IPAM.Config {
		if c.Subnet.Addr().Is4() {
			ipam = append(ipam, network.IPAMConfig{Subnet: c.Subnet, Gateway: c.Gateway})
		}
	}
	if err := n.Remove(ctx); err != nil {
		return nil, err
	}
	if len(ipam) == 0 {
		return nil, fmt.Errorf("network %s got no IPv4 subnet", name)
	}
	opts.IPAM = &network.IPAM{Config: ipam}
	if r, err = d.cli.NetworkCreate(ctx, name, opts); err != nil {
		return nil, err
	}
	n.ID = r.ID
	return n, nil
}

// Remove removes the network; its members must be gone.
func (n *Network) Remove(ctx context.Context) error {
	_, err := n.d.cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{})
	return err
}

// Disconnect cuts the container off network n (its Spec's), keeping its
// address there for Connect. A container this Disconnect already cut off
// stays off: a call that failed may have done its work, and is retried.
func (c *Container) Disconnect(ctx context.Context, n *Network) error {
	ip, _, err := c.Endpoint(ctx, n.Name)
	if err != nil {
		c.mu.Lock()
		_, off := c.addrs[n.ID]
		c.mu.Unlock()
		if off && errors.Is(err, errNotOnNetwork) {
			return nil
		}
		return err
	}
	c.mu.Lock()
	if c.addrs == nil {
		c.addrs = map[string]netip.Addr{}
	}
	c.addrs[n.ID] = ip
	c.mu.Unlock()
	_, err = c.d.cli.NetworkDisconnect(ctx, n.ID, client.NetworkDisconnectOptions{Container: c.ID, Force: true})
	return err
}

// Connect attaches the container to network n under its Spec's Alias, at
// the address it had there before Disconnect; a container already on n
// stays as it is.
func (c *Container) Connect(ctx context.Context, n *Network) error {
	if _, _, err := c.Endpoint(ctx, n.Name); err == nil {
		return nil
	} else if !errors.Is(err, errNotOnNetwork) {
		return err
	}
	ep := &network.EndpointSettings{Aliases: []string{c.Spec.Alias}}
	c.mu.Lock()
	if ip, ok := c.addrs[n.ID]; ok {
		ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: ip}
	}
	c.mu.Unlock()
	_, err := c.d.cli.NetworkConnect(ctx, n.ID, client.NetworkConnectOptions{Container: c.ID, EndpointConfig: ep})
	return err
}

// RandomID returns n random bytes in hex, for names that must not collide
// between tests and processes.
func RandomID(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
