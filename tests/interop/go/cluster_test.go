package interop

// go-redis v9's ClusterClient and redsync over ClusterClient pools, with their defaults
// and only a seed address, against clusters of 3 nodes that each case starts: redlockd
// nodes in --cluster-mode map given a map by CLUSTER SETMAP, or, against redis-server,
// a real Redis Cluster (--cluster-enabled yes, then redis-cli --cluster create), so
// every case also runs, and can fail, against Redis.

import (
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
