package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

// The lost reply against redsync (defaults) over go-redis (defaults): the SET NX ran
// on the node, its reply is lost and the connection closed (the `drop_reply` fault of
// `redlockd harness`, docs/testing.md, driven here over its JSON protocol).

// harness is a `redlockd harness` process: its nodes' addresses and its control pipe.
type harness struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	addrs []string
	id    int
}

func startHarness(t *testing.T, n int) *harness {
	t.Helper()
	if bin == "" {
		t.Fatal("INTEROP_SERVER_BIN is not set (run through jvm_go.sh)")
	}
	cmd := exec.Command(bin, "harness", "--nodes", fmt.Sprint(n))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &harness{cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	h.out.Buffer(make([]byte, 1<<20), 1<<20)
	// Closing stdin stops the harness (and its nodes); wait for it, bounded.
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	if !h.out.Scan() {
		t.Fatalf("no ready line: %v", h.out.Err())
	}
	var ready struct {
		Ready bool
		Nodes []struct{ Addr string }
	}
	if err := json.Unmarshal(h.out.Bytes(), &ready); err != nil || !ready.Ready {
		t.Fatalf("ready line %q: %v", h.out.Text(), err)
	}
	for _, nd := range ready.Nodes {
		h.addrs = append(h.addrs, nd.Addr)
	}
	return h
}

// do sends one request and returns its "ok" value; an error reply fails the test.
func (h *harness) do(t *testing.T, req map[string]any) any {
	t.Helper()
	h.id++
	req["id"] = h.id
	line, _ := json.Marshal(req)
	if _, err := h.in.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	if !h.out.Scan() {
		t.Fatalf("harness gone: %v", h.out.Err())
	}
	var reply struct {
		Ok    any
		Error *string
	}
	if err := json.Unmarshal(h.out.Bytes(), &reply); err != nil || reply.Error != nil {
		t.Fatalf("%s: %s (%v)", line, h.out.Text(), err)
	}
	return reply.Ok
}

// history returns node i's recorded SETs of key: (reply, outcome) pairs in order.
func (h *harness) sets(t *testing.T, i int, key string) [][2]any {
	var out [][2]any
	for _, e := range h.do(t, map[string]any{"op": "history", "node": i}).([]any) {
		e := e.(map[string]any)
		cmd := e["command"].([]any)
		if len(cmd) > 1 && cmd[0] == "set" && cmd[1] == key {
			out = append(out, [2]any{e["reply"], e["outcome"]})
		}
	}
	return out
}

func TestRedsyncLostSetNXReplyOnEveryNode(t *testing.T) {
	redlockdOnly(t)
	h := startHarness(t, 3)
	name := unique("redsync-lost")
	h.do(t, map[string]any{"op": "record"})
	for i := range h.addrs {
		h.do(t, map[string]any{"op": "fault", "node": i, "action": "drop_reply", "command": "set", "key": name, "count": 1})
	}
	pools := make([]redis.Pool, 0, len(h.addrs))
	for _, a := range h.addrs {
		pools = append(pools, goredis.NewPool(client(t, a)))
	}
	m := redsync.New(pools...).NewMutex(name)
	// go-redis retries the SET NX on a new connection; it finds the key (the lost try's,
	// its own value) and answers nil on every node: no quorum on the first try.
	// redsync then releases with its value (freeing the keys) and tries again (its
	// defaults: 32 tries, 50-250 ms apart, real time), which takes the lock.
	if err := m.Lock(); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	for i := range h.addrs {
		got := h.sets(t, i, name)
		if len(got) < 3 || got[0] != [2]any{"OK", "reply_dropped"} || got[1] != [2]any{nil, "answered"} || got[len(got)-1] != [2]any{"OK", "answered"} {
			t.Fatalf("node %d's SETs of the lock: %v; want the lost OK, go-redis's retry answered nil, then a later try's OK", i, got)
		}
		v, err := raw(t, h.addrs[i]).Get(context.Background(), name).Result()
		if err != nil || v != m.Value() {
			t.Fatalf("node %d holds %q (%v), want the mutex's value", i, v, err)
		}
	}
	if ok, err := m.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock: %v %v", ok, err)
	}
}
