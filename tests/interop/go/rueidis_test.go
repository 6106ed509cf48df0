package interop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidis and rueidislock with their defaults: RESP3 only, client-side caching on
// (CLIENT TRACKING ON OPTOUT; a waiter wakes on the invalidation push), 5 s key
// validity extended every 2.5 s, a majority of 3 keys on one node.
//
// Environment, not a client deviation: rueidislock sets its keys with PXAT from the
// client's wall clock, so these cases run on a node of their own with the real clock
// (a manual clock's wall time is not the client's).

func TestRueidisClientSideCaching(t *testing.T) {
	n := startNode(t, false)
	ctx := ctxT(t, 20*time.Second)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{n.addr}})
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	defer c.Close()
	key := unique("csc")
	if err := c.Do(ctx, c.B().Set().Key(key).Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	get := func() rueidis.RedisResult { return c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute) }
	if v, _ := get().ToString(); v != "1" {
		t.Fatalf("first read %q", v)
	}
	r := get()
	if v, _ := r.ToString(); v != "1" || !r.IsCacheHit() {
		t.Fatalf("second read %q, cache hit %v", v, r.IsCacheHit())
	}
	// another client's write: the server pushes an invalidation and the cache drops it
	raw(t, n.addr).Set(ctx, key, "2", 0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = get()
		if v, _ := r.ToString(); v == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no invalidation: the cache still serves the old value")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRueidislock(t *testing.T) {
	n := startNode(t, false)
	ctx := ctxT(t, 30*time.Second)
	newLocker := func() rueidislock.Locker {
		l, err := rueidislock.NewLocker(rueidislock.LockerOption{
			ClientOption: rueidis.ClientOption{InitAddress: []string{n.addr}},
		})
		if err != nil {
			t.Fatalf("NewLocker: %v", err)
		}
		t.Cleanup(l.Close)
		return l
	}
	a, b := newLocker(), newLocker()
	name := unique("rueidislock")

	lctx, cancel, err := a.WithContext(ctx, name)
	if err != nil {
		t.Fatalf("WithContext: %v", err)
	}
	if lctx.Err() != nil {
		t.Fatal("the lock's context is already done")
	}
	// 2 of the 3 keys at least (the third is taken in the background)
	held := 0
	for i := 0; i < 3; i++ {
		if raw(t, n.addr).Exists(ctx, "rueidislock:"+string(rune('0'+i))+":"+name).Val() == 1 {
			held++
		}
	}
	if held < 2 {
		t.Fatalf("%d of 3 keys held", held)
	}
	if _, _, err := b.TryWithContext(ctx, name); !errors.Is(err, rueidislock.ErrNotLocked) {
		t.Fatalf("TryWithContext on a held lock: %v, want ErrNotLocked", err)
	}
	// a waiter blocks until the holder lets go; it wakes on the invalidation push
	got := make(chan error, 1)
	var bcancel context.CancelFunc
	go func() {
		_, c, err := b.WithContext(ctx, name)
		bcancel = c
		got <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("the waiter returned while the lock was held: %v", err)
	default:
	}
	released := time.Now()
	cancel()
	if lctx.Err() == nil {
		t.Fatal("cancel did not end the lock's context")
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter failed: %v", err)
		}
		t.Logf("the waiter got the lock %v after the release", time.Since(released))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never woke (no invalidation push?)")
	}
	bcancel()
}
