package interop

// go-redis v9's ClusterClient and redsync over ClusterClient pools, with their defaults
// and only a seed address, against clusters of 3 nodes that each case starts: redlockd
// nodes in --cluster-mode map given a map by CLUSTER SETMAP, or, against redis-server,
// a real Redis Cluster (--cluster-enabled yes, then redis-cli --cluster create), so
// every case also runs, and can fail, against Redis.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

type cluster3 struct {
	nodes []*node
	addrs []string
}

// clusterPort is a free port below the ephemeral range whose port+10000 (Redis's
// cluster bus) is free too.
func clusterPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(10000)
		ok := true
		for _, q := range []int{p, p + 10000} {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

// startCluster3 starts 3 nodes sharing the 16384 slots in thirds and waits until each
// says cluster_state:ok.
func startCluster3(t *testing.T) *cluster3 {
	t.Helper()
	c := &cluster3{}
	ports := []int{clusterPort(t), clusterPort(t), clusterPort(t)}
	for i, p := range ports {
		var extra []string
		if isRedlockd() {
			extra = []string{"--cluster-mode", "map", "--cluster-node-id", fmt.Sprintf("%040x", i+1)}
		} else {
			extra = []string{"--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("%s/go-cluster-%d.conf", logDir, p)}
		}
		n := startNodeOn(t, p, false, extra...)
		c.nodes = append(c.nodes, n)
		c.addrs = append(c.addrs, n.addr)
	}
	ctx := ctxT(t, 30*time.Second)
	if isRedlockd() {
		var entries []string
		for i, p := range ports {
			first, last := 16384*i/3, 16384*(i+1)/3-1
			entries = append(entries, fmt.Sprintf(`{"id":"%040x","host":"127.0.0.1","port":%d,"slots":[[%d,%d]]}`, i+1, p, first, last))
		}
		m := `{"version":1,"nodes":[` + strings.Join(entries, ",") + `]}`
		for _, a := range c.addrs {
			if err := raw(t, a).Do(ctx, "CLUSTER", "SETMAP", m).Err(); err != nil {
				t.Fatalf("CLUSTER SETMAP on %s: %v", a, err)
			}
		}
	} else {
		args := append([]string{"--cluster", "create"}, c.addrs...)
		out, err := exec.CommandContext(ctx, "redis-cli", append(args, "--cluster-yes")...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
		}
	}
	for _, a := range c.addrs {
		r := raw(t, a)
		for {
			info, _ := r.ClusterInfo(ctx).Result()
			slots, _ := r.ClusterSlots(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && len(slots) == 3 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: no cluster_state:ok with 3 ranges: %q", a, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
}

// clusterClient is go-redis's ClusterClient with its defaults and one seed.
func clusterClient(t *testing.T, seed string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestClusterClientSpreadsKeysAndKeepsSlotsApart(t *testing.T) {
	cl := startCluster3(t)
	ctx := ctxT(t, 60*time.Second)
	c := clusterClient(t, cl.addrs[0])
	// COMMAND is what the ClusterClient routes by: entries of 6, 7 or 10 fields, or it
	// fails ("got N elements in COMMAND reply, wanted 6/7/10").
	info, err := c.Command(ctx).Result()
	if err != nil {
		t.Fatalf("COMMAND: %v", err)
	}
	if set := info["set"]; set == nil || set.FirstKeyPos != 1 || set.Arity != -3 {
		t.Fatalf("COMMAND's set entry: %+v", set)
	}
	prefix := unique("cluster")
	for i := range 300 {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if ok, err := c.SetNX(ctx, k, "v1", 30*time.Second).Result(); err != nil || !ok {
			t.Fatalf("SET %s NX PX: %v %v", k, ok, err)
		}
		if ok, err := c.SetNX(ctx, k, "v2", 30*time.Second).Result(); err != nil || ok {
			t.Fatalf("SET %s NX PX granted twice: %v %v", k, ok, err)
		}
	}
	for _, a := range cl.addrs {
		if n := raw(t, a).DBSize(ctx).Val(); n < 50 {
			t.Fatalf("%s holds %d keys, want about a third of 300", a, n)
		}
	}
	// A transaction on one hash tag: MULTI/EXEC on the tag's node.
	tag := "{" + prefix + ":order}"
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.SetNX(ctx, tag+":lock", "me", 10*time.Second)
		p.Incr(ctx, tag+":fence")
		return nil
	})
	if err != nil || !cmds[0].(*redis.BoolCmd).Val() || cmds[1].(*redis.IntCmd).Val() != 1 {
		t.Fatalf("TxPipelined on one slot: %v %v", cmds, err)
	}
	// Keys of two slots in one script: the server's CROSSSLOT.
	err = c.Eval(ctx, "return 1", []string{tag + ":a", prefix + ":elsewhere"}).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT Keys in request don't hash to the same slot") {
		t.Fatalf("cross-slot EVAL: %v", err)
	}
	// A key sent to a node that does not serve it: MOVED, which the client follows.
	k := prefix + ":0"
	slot := c.ClusterKeySlot(ctx, k).Val()
	for _, a := range cl.addrs {
		err := raw(t, a).Get(ctx, k).Err()
		if err != nil && !strings.HasPrefix(err.Error(), fmt.Sprintf("MOVED %d ", slot)) {
			t.Fatalf("GET %s on %s: %v", k, a, err)
		}
	}
	if v := c.Get(ctx, k).Val(); v != "v1" {
		t.Fatalf("GET %s: %q", k, v)
	}
}

// redsync over 3 pools, each a ClusterClient (one cluster = one vote): locks hold, and
// keep holding with one whole cluster down.
func TestRedsyncOverThreeClustersWithOneDown(t *testing.T) {
	cls := []*cluster3{startCluster3(t), startCluster3(t), startCluster3(t)}
	ctx := ctxT(t, 90*time.Second)
	rsOver := func() *redsync.Redsync {
		var pools []rsredis.Pool
		for _, cl := range cls {
			pools = append(pools, goredis.NewPool(clusterClient(t, cl.addrs[0])))
		}
		return redsync.New(pools...)
	}
	a, b := rsOver(), rsOver()
	name := unique("redsync-cluster")
	m := a.NewMutex(name)
	if err := m.LockContext(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	for i, cl := range cls {
		if v := clusterClient(t, cl.addrs[1]).Get(ctx, name).Val(); v != m.Value() {
			t.Fatalf("cluster %d holds %q, want the mutex's value", i, v)
		}
	}
	rival := b.NewMutex(name, redsync.WithTries(1))
	var taken *redsync.ErrTaken
	if err := rival.TryLockContext(ctx); !errors.As(err, &taken) {
		t.Fatalf("a rival got a held lock: %v", err)
	}
	// The third cluster goes down, all of it.
	for _, n := range cls[2].nodes {
		n.kill()
	}
	if ok, err := m.ExtendContext(ctx); !ok || err != nil {
		t.Fatalf("Extend with 2 of 3 clusters: %v %v", ok, err)
	}
	if err := rival.TryLockContext(ctx); err == nil {
		t.Fatal("a rival got a held lock with one cluster down")
	}
	if ok, err := m.UnlockContext(ctx); !ok {
		t.Fatalf("Unlock with 2 of 3 clusters: %v %v", ok, err)
	}
	other := b.NewMutex(unique("redsync-cluster"))
	if err := other.LockContext(ctx); err != nil {
		t.Fatalf("Lock with 2 of 3 clusters: %v", err)
	}
	if ok, _ := other.UnlockContext(ctx); !ok {
		t.Fatal("Unlock")
	}
}

// clusterHolder is the node of cl whose keyspace has key (TYPE is not none; the others
// answer MOVED), or "" when none has it.
func clusterHolder(t *testing.T, ctx context.Context, cl *cluster3, key string) string {
	t.Helper()
	found := ""
	for _, a := range cl.addrs {
		if typ, err := raw(t, a).Type(ctx, key).Result(); err == nil && typ != "none" {
			if found != "" {
				t.Fatalf("%s on two nodes: %s and %s", key, found, a)
			}
			found = a
		}
	}
	return found
}

// redsync over one ClusterClient (its defaults, one seed), a lock held while `redlockd
// slots move` moves its slot to another node: the key arrives with the mutex's value,
// the old owner answers MOVED, Extend renews it on the new owner, a contender's TryLock
// is refused before, during and after the move, and Unlock deletes it on the new owner
// with nothing of the slot left on the old one. redlockd only: moving a slot of a Redis
// Cluster is MIGRATE with ASK redirections, which this battery does not set up. With a
// move that sends no key, the new owner has no value, Extend fails and the contender
// gets the lock.
func TestRedsyncOverClusterClientAcrossALiveSlotMove(t *testing.T) {
	if !isRedlockd() {
		t.Skip("a live slot move is redlockd's `slots move` (see the comment)")
	}
	cl := startCluster3(t)
	ctx := ctxT(t, 60*time.Second)
	mine := redsync.New(goredis.NewPool(clusterClient(t, cl.addrs[0])))
	theirs := redsync.New(goredis.NewPool(clusterClient(t, cl.addrs[1])))
	name := unique("redsync-cluster-moving")
	m := mine.NewMutex(name)
	if err := m.LockContext(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	old := clusterHolder(t, ctx, cl, name)
	if old == "" {
		t.Fatal("no node has the lock's key")
	}
	slot := raw(t, old).ClusterKeySlot(ctx, name).Val()
	inSlot := raw(t, old).ClusterCountKeysInSlot(ctx, int(slot)).Val()
	to := cl.addrs[0]
	if to == old {
		to = cl.addrs[1]
	}
	rival := theirs.NewMutex(name)
	refused := func(when string) {
		t.Helper()
		var taken *redsync.ErrTaken
		if err := rival.TryLockContext(ctx); !errors.As(err, &taken) {
			t.Fatalf("the contender's TryLock %s: %v, want ErrTaken", when, err)
		}
	}
	refused("before the move")

	// The contender tries over and over while the slot moves.
	stop := make(chan struct{})
	done := make(chan [2]int)
	go func() {
		tries, grants := 0, 0
		for {
			select {
			case <-stop:
				done <- [2]int{tries, grants}
				return
			default:
			}
			tries++
			if rival.TryLockContext(ctx) == nil {
				grants++
				_, _ = rival.UnlockContext(ctx)
			}
		}
	}()
	out, err := exec.CommandContext(ctx, bin, "slots", "move", "--slots", strconv.FormatInt(slot, 10), "--to", to, "--seed", old).CombinedOutput()
	close(stop)
	counts := <-done
	if err != nil {
		t.Fatalf("redlockd slots move: %v\n%s", err, out)
	}
	if counts[0] == 0 || counts[1] != 0 {
		t.Fatalf("the contender was granted the held lock %d times in %d tries during the move", counts[1], counts[0])
	}
	t.Logf("the contender's TryLock: refused %d times while the slot moved", counts[0])

	// The old owner sends clients on; the new one has the mutex's value.
	if err := raw(t, old).Get(ctx, name).Err(); err == nil || err.Error() != fmt.Sprintf("MOVED %d %s", slot, to) {
		t.Fatalf("GET on the old owner after the move: %v", err)
	}
	if h := clusterHolder(t, ctx, cl, name); h != to {
		t.Fatalf("the key is on %q after the move, want %s", h, to)
	}
	direct := raw(t, to)
	if v := direct.Get(ctx, name).Val(); v != m.Value() {
		t.Fatalf("the new owner holds %q, want the mutex's value", v)
	}
	// Extend on the new owner: once its TTL is below 7.6 s (real clock), back to 8 s.
	deadline := time.Now().Add(3 * time.Second)
	before := direct.PTTL(ctx, name).Val()
	for before >= 7600*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("the key's TTL stays at %v", before)
		}
		time.Sleep(10 * time.Millisecond)
		before = direct.PTTL(ctx, name).Val()
	}
	if ok, err := m.ExtendContext(ctx); !ok || err != nil {
		t.Fatalf("Extend after the move: %v %v", ok, err)
	}
	if pttl := direct.PTTL(ctx, name).Val(); pttl <= before || pttl < 7600*time.Millisecond || pttl > 8*time.Second {
		t.Fatalf("the new owner's TTL after Extend: %v (before: %v), want about redsync's 8 s", pttl, before)
	}
	refused("after the move")
	if ok, err := m.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("Unlock after the move: %v %v", ok, err)
	}
	if n := direct.Exists(ctx, name).Val(); n != 0 {
		t.Fatal("the new owner still has the key after Unlock")
	}
	if n := raw(t, old).ClusterCountKeysInSlot(ctx, int(slot)).Val(); n != 0 {
		t.Fatalf("the old owner keeps %d keys of slot %d", n, slot)
	}
	if err := rival.TryLockContext(ctx); err != nil {
		t.Fatalf("the contender's TryLock after the Unlock: %v", err)
	}
	if h := clusterHolder(t, ctx, cl, name); h != to {
		t.Fatalf("the contender's key is on %q, want %s", h, to)
	}
	if ok, err := rival.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("the contender's Unlock: %v %v", ok, err)
	}
	// The move's report, last: the clients' view above is what the case is about.
	want := fmt.Sprintf("moved slots %d from %s to %s at map version ", slot, old, to)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), fmt.Sprintf(": %d keys", inSlot)) {
		t.Fatalf("slots move printed %q, want %q and %d keys", out, want, inSlot)
	}
}
