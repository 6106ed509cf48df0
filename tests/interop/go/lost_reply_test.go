package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

// scripts returns node i's recorded EVAL / EVALSHA of key: (command name, reply, outcome).
func (h *harness) scripts(t *testing.T, i int, key string) [][3]any {
	var out [][3]any
	for _, e := range h.do(t, map[string]any{"op": "history", "node": i}).([]any) {
		e := e.(map[string]any)
		cmd := e["command"].([]any)
		if len(cmd) > 3 && (cmd[0] == "eval" || cmd[0] == "evalsha") && cmd[3] == key {
			out = append(out, [3]any{cmd[0], e["reply"], e["outcome"]})
		}
	}
	return out
}

// The release's reply is lost on 2 of 3 nodes: the unlock script ran (the keys are
// deleted), its reply is lost and the connection closed.
func TestRedsyncLostUnlockReplyOnMajority(t *testing.T) {
	redlockdOnly(t)
	h := startHarness(t, 3)
	name := unique("redsync-lost-unlock")
	pools := make([]redis.Pool, 0, len(h.addrs))
	for _, a := range h.addrs {
		pools = append(pools, goredis.NewPool(client(t, a)))
	}
	m := redsync.New(pools...).NewMutex(name)
	if err := m.Lock(); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	h.do(t, map[string]any{"op": "record"})
	for i := 0; i < 2; i++ {
		h.do(t, map[string]any{"op": "fault", "node": i, "action": "drop_reply", "command": "eval", "key": name, "count": 1})
	}
	// go-redis retries the EVAL on a new connection (the lost reply is an EOF); the
	// script, run again, finds the key gone and answers -1, which redsync reads as
	// ErrLockAlreadyExpired: 1 release of 3 counted, no quorum, Unlock fails.
	ok, err := m.Unlock()
	if ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
		t.Fatalf("Unlock: %v %v; want false and ErrLockAlreadyExpired", ok, err)
	}
	noscript := [3]any{"evalsha", map[string]any{"error": "NOSCRIPT No matching script. Please use EVAL."}, "answered"}
	for i := range h.addrs {
		want := [][3]any{noscript, {"eval", int64(1), "reply_dropped"}, {"eval", int64(-1), "answered"}}
		if i == 2 {
			want = [][3]any{noscript, {"eval", int64(1), "answered"}}
		}
		if got := h.scripts(t, i, name); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("node %d's scripts on the lock: %v; want %v", i, got, want)
		}
		// the lock is released on every node all the same
		if n, err := raw(t, h.addrs[i]).Exists(context.Background(), name).Result(); err != nil || n != 0 {
			t.Fatalf("node %d: EXISTS %d (%v), want 0: the unlock ran", i, n, err)
		}
	}
	// each fault fired once, on the release (EVAL of the delete script, the mutex's value)
	for i := 0; i < 2; i++ {
		fs := h.do(t, map[string]any{"op": "faults", "node": i}).([]any)
		f := fs[0].(map[string]any)
		firing := f["firings"].([]any)[0].(map[string]any)["command"].([]any)
		if len(fs) != 1 || f["fired"] != float64(1) || firing[0] != "eval" || firing[3] != name || firing[4] != m.Value() {
			t.Fatalf("node %d's faults: %v", i, fs)
		}
	}
	if fs := h.do(t, map[string]any{"op": "faults", "node": 2}).([]any); len(fs) != 0 {
		t.Fatalf("node 2 has faults: %v", fs)
	}
	// and a new mutex gets it at once
	if err := redsync.New(pools...).NewMutex(name).Lock(); err != nil {
		t.Fatalf("Lock after the failed Unlock: %v", err)
	}
}
