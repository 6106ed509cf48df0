// The Go interop battery: redsync v4 over go-redis v9, bsm/redislock, rueidis with
// rueidislock, and go-redis's transactions, with their default settings, against the
// nodes ../jvm_go.sh starts. It sets (as run.sh does for the Python and Node cases):
//
//	INTEROP_SERVER      redlockd | redis
//	INTEROP_NODES       host:port,... of the 5 shared nodes
//	INTEROP_SERVER_BIN  the server binary, for cases that start (and kill) nodes of their own
//	INTEROP_LOG_DIR     their logs; extra-pids lists them for the runner's cleanup
//	INTEROP_LOCK_DELAY_MS  the shared nodes' --lock-delay: 0 in the first pass; the
//	                    second pass runs the Test*Expiry cases again on nodes with
//	                    --lock-delay 5s
//
// Against redlockd the shared nodes run on the manual clock (--clock manual
// --enable-debug-command): expiry is tested with DEBUG CLOCK ADVANCE, not by sleeping;
// those cases are skipped against redis-server.
package interop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	kind   = envOr("INTEROP_SERVER", "redlockd")
	bin    = os.Getenv("INTEROP_SERVER_BIN")
	logDir = envOr("INTEROP_LOG_DIR", os.TempDir())
	nodes  = splitNodes(os.Getenv("INTEROP_NODES"))
	// lockDelayMs is the shared nodes' --lock-delay in ms (0: off).
	lockDelayMs = mustMs(envOr("INTEROP_LOCK_DELAY_MS", "0"))
)

func mustMs(s string) int64 {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 {
		panic("INTEROP_LOCK_DELAY_MS must be a number of milliseconds, not " + strconv.Quote(s))
	}
	return ms
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func splitNodes(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func isRedlockd() bool { return kind == "redlockd" }

func needNodes(t *testing.T, n int) []string {
	t.Helper()
	if len(nodes) < n {
		t.Fatalf("INTEROP_NODES has %d nodes, the case needs %d (run through jvm_go.sh)", len(nodes), n)
	}
	return nodes[:n]
}

// redlockdOnly skips a case that moves the server's clock (DEBUG CLOCK ADVANCE).
func redlockdOnly(t *testing.T) {
	t.Helper()
	if !isRedlockd() {
		t.Skip("needs redlockd's manual clock (DEBUG CLOCK); real Redis lacks it")
	}
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "interop:go:" + prefix + ":" + hex.EncodeToString(b)
}

// client is go-redis v9 with its defaults: only the address is set.
func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// raw is a go-redis client used for the checks (PTTL, DEBUG), RESP2 so replies are plain.
func raw(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// advanceClock moves the manual clock of every shared node forward by ms.
func advanceClock(t *testing.T, ms int64) {
	t.Helper()
	ctx := context.Background()
	for _, addr := range nodes {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
		res, err := c.Do(ctx, "DEBUG", "CLOCK", "ADVANCE", ms).Text()
		_ = c.Close()
		if err != nil || res != "OK" {
			t.Fatalf("DEBUG CLOCK ADVANCE on %s: %q %v", addr, res, err)
		}
	}
}

// passLockDelay is called when a lock's TTL has just run out on the shared nodes (their
// clocks at its deadline + 1 ms). With their lock-delay on, it checks that refused()
// holds then and in the delay's last millisecond, and moves the clocks past the delay;
// with it off (Redis, and the first pass) it does nothing.
func passLockDelay(t *testing.T, refused func() bool) {
	t.Helper()
	if lockDelayMs == 0 {
		return
	}
	if !isRedlockd() {
		t.Fatal("INTEROP_LOCK_DELAY_MS is redlockd's --lock-delay; Redis has none")
	}
	if !refused() {
		t.Fatal("the expired lock was granted at once, during the lock-delay")
	}
	advanceClock(t, lockDelayMs-1)
	if !refused() {
		t.Fatal("the expired lock was granted in the lock-delay's last millisecond")
	}
	advanceClock(t, 1)
}

// node is a server process of the kind under test, owned by one case.
type node struct {
	addr string
	cmd  *exec.Cmd
	log  *os.File
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNode starts a node; manualClock picks --clock manual for redlockd (the shared
// nodes' setting) or the real clock, as users run it. It is stopped when the case ends.
func startNode(t *testing.T, manualClock bool) *node {
	t.Helper()
	return startNodeOn(t, freePort(t), manualClock)
}

// startNodeOn starts a node on port with extra flags after the usual ones.
func startNodeOn(t *testing.T, port int, manualClock bool, extra ...string) *node {
	t.Helper()
	ps := strconv.Itoa(port)
	var args []string
	if isRedlockd() {
		args = []string{"--max-ttl", "30s", "--restart-delay", "0", "--dir", filepath.Join(logDir, "go-dir-"+ps)}
		if manualClock {
			args = append(args, "--clock", "manual", "--enable-debug-command")
		}
	} else {
		args = []string{"--save", "", "--appendonly", "no", "--daemonize", "no"}
	}
	args = append(args, extra...)
	return launch(t, port, args)
}

// launch starts the server under test on port with exactly args (after --bind and
// --port), waits for its PING and stops it when the case ends.
func launch(t *testing.T, port int, args []string) *node {
	t.Helper()
	if bin == "" {
		t.Fatal("INTEROP_SERVER_BIN is not set (run through jvm_go.sh)")
	}
	ps := strconv.Itoa(port)
	args = append([]string{"--bind", "127.0.0.1", "--port", ps}, args...)
	log, err := os.OpenFile(filepath.Join(logDir, "go-node-"+ps+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if f, err := os.OpenFile(filepath.Join(logDir, "extra-pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintf(f, "%d\n", cmd.Process.Pid)
		f.Close()
	}
	n := &node{addr: "127.0.0.1:" + ps, cmd: cmd, log: log}
	t.Cleanup(n.stop)
	c := redis.NewClient(&redis.Options{Addr: n.addr, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		pong, err := c.Ping(ctx).Result()
		cancel()
		if err == nil && pong == "PONG" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s did not answer PING: %v", n.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill: SIGKILL, as a crashed machine.
func (n *node) kill() {
	if n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
	}
}

func (n *node) stop() {
	if n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = n.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = n.cmd.Process.Kill()
			<-done
		}
	}
	_ = n.log.Close()
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
