package interop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
)

// redsync v4 with its defaults (8 s expiry, 32 tries, 50-250 ms between tries) over
// go-redis v9 clients with theirs. No deviations.

func redsyncOver(t *testing.T, addrs []string) *redsync.Redsync {
	t.Helper()
	pools := make([]redis.Pool, 0, len(addrs))
	for _, a := range addrs {
		pools = append(pools, goredis.NewPool(client(t, a)))
	}
	return redsync.New(pools...)
}

func TestRedsyncLockExtendUnlock(t *testing.T) {
	addrs := needNodes(t, 5)
	rs := redsyncOver(t, addrs)
	name := unique("redsync")
	m := rs.NewMutex(name)
	if err := m.Lock(); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	for _, a := range addrs {
		c := raw(t, a)
		v, err := c.Get(context.Background(), name).Result()
		if err != nil || v != m.Value() {
			t.Fatalf("%s holds %q (%v), want the mutex's value", a, v, err)
		}
		pttl := c.PTTL(context.Background(), name).Val()
		if pttl <= 7*time.Second || pttl > 8*time.Second {
			t.Fatalf("%s: pttl %v, want about the default 8 s", a, pttl)
		}
	}
	if ok, err := m.Valid(); !ok || err != nil {
		t.Fatalf("Valid: %v %v", ok, err)
	}
	if isRedlockd() {
		advanceClock(t, 5000) // server time passes; Extend renews to 8 s again
	}
	if ok, err := m.Extend(); !ok || err != nil {
		t.Fatalf("Extend: %v %v", ok, err)
	}
	pttl := raw(t, addrs[0]).PTTL(context.Background(), name).Val()
	if pttl <= 7*time.Second || pttl > 8*time.Second {
		t.Fatalf("pttl after Extend %v", pttl)
	}
	if ok, err := m.Unlock(); !ok || err != nil {
		t.Fatalf("Unlock: %v %v", ok, err)
	}
	for _, a := range addrs {
		if n := raw(t, a).Exists(context.Background(), name).Val(); n != 0 {
			t.Fatalf("%s still has the key after Unlock", a)
		}
	}
	// a second Unlock finds nothing of its own
	if ok, err := m.Unlock(); ok || err == nil {
		t.Fatalf("second Unlock: %v %v", ok, err)
	}
}

func TestRedsyncContention(t *testing.T) {
	addrs := needNodes(t, 5)
	a := redsyncOver(t, addrs).NewMutex(unique("redsync-c"))
	name := a.Name()
	b := redsyncOver(t, addrs).NewMutex(name)
	if err := a.Lock(); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(); err == nil {
		t.Fatal("TryLock got a held mutex")
	}
	got := make(chan error, 1)
	start := time.Now()
	go func() { got <- b.Lock() }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("Lock returned while held: %v", err)
	default:
	}
	if ok, err := a.Unlock(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the mutex")
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("waited only %v", waited)
	}
	if ok, err := b.Unlock(); !ok || err != nil {
		t.Fatal(ok, err)
	}
}

func TestRedsyncExpiry(t *testing.T) {
	redlockdOnly(t)
	addrs := needNodes(t, 5)
	name := unique("redsync-exp")
	a := redsyncOver(t, addrs).NewMutex(name)
	if err := a.Lock(); err != nil {
		t.Fatal(err)
	}
	b := redsyncOver(t, addrs).NewMutex(name)
	advanceClock(t, 8000) // a key lives through its deadline's millisecond
	if err := b.TryLock(); err == nil {
		t.Fatal("a live mutex was taken")
	}
	advanceClock(t, 1)
	passLockDelay(t, func() bool { return b.TryLock() != nil })
	if err := b.TryLock(); err != nil {
		t.Fatalf("the expired mutex was not free: %v", err)
	}
	// the old holder's Extend and Unlock now fail
	if ok, _ := a.Extend(); ok {
		t.Fatal("the expired holder extended")
	}
	if ok, _ := b.Unlock(); !ok {
		t.Fatal("the new holder could not unlock")
	}
}

// Three shared nodes and two of the case's own, which it kills: the quorum (3 of 5)
// still locks. Then a third is killed: Lock fails, within its retry bound.
func TestRedsyncNodesDown(t *testing.T) {
	shared := needNodes(t, 2)
	own := []*node{startNode(t, true), startNode(t, true), startNode(t, true)}
	addrs := []string{shared[0], shared[1], own[0].addr, own[1].addr, own[2].addr}
	rs := redsyncOver(t, addrs)
	name := unique("redsync-down")

	own[0].kill()
	own[1].kill()
	m := rs.NewMutex(name)
	if err := m.Lock(); err != nil {
		t.Fatalf("3 of 5 up: Lock: %v", err)
	}
	for _, a := range []string{shared[0], shared[1], own[2].addr} {
		if v := raw(t, a).Get(context.Background(), name).Val(); v != m.Value() {
			t.Fatalf("%s holds %q", a, v)
		}
	}
	if ok, err := m.Unlock(); !ok {
		t.Fatalf("3 of 5 up: Unlock: %v %v", ok, err)
	}

	own[2].kill()
	m2 := rs.NewMutex(name)
	// the bound: 32 tries, each at most 250 ms apart and 400 ms (5% of 8 s) long
	bound := 32 * (250 + 400) * time.Millisecond
	start := time.Now()
	err := m2.Lock()
	took := time.Since(start)
	if err == nil {
		t.Fatal("2 of 5 up: Lock succeeded")
	}
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) {
		t.Fatalf("2 of 5 up: the lock was reported taken, not failed: %v", err)
	}
	if took > bound {
		t.Fatalf("2 of 5 up: Lock failed after %v, past its bound %v", took, bound)
	}
	t.Logf("2 of 5 up: Lock failed after %v (bound %v): %v", took, bound, err)
	for _, a := range shared {
		if n := raw(t, a).Exists(context.Background(), name).Val(); n != 0 {
			t.Fatalf("%s kept the failed attempt's key", a)
		}
	}
}
