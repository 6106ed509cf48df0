package interop

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bsm/redislock"
)

// bsm/redislock with its defaults (nil Options: no retry, a random 22-byte token) over
// a go-redis v9 client with its defaults. v0.9.4 has no fencing option. No deviations.

func TestRedislockObtainRefreshRelease(t *testing.T) {
	addr := needNodes(t, 4)[3]
	ctx := ctxT(t, 30*time.Second)
	locker := redislock.New(client(t, addr))
	other := redislock.New(client(t, addr))
	key := unique("redislock")

	lock, err := locker.Obtain(ctx, key, 10*time.Second, nil)
	if err != nil {
		t.Fatalf("Obtain: %v", err)
	}
	if _, err := other.Obtain(ctx, key, 10*time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("second Obtain: %v, want ErrNotObtained", err)
	}
	ttl, err := lock.TTL(ctx)
	if err != nil || ttl <= 9*time.Second || ttl > 10*time.Second {
		t.Fatalf("TTL %v %v", ttl, err)
	}
	if err := lock.Refresh(ctx, 20*time.Second, nil); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if ttl, _ = lock.TTL(ctx); ttl <= 19*time.Second || ttl > 20*time.Second {
		t.Fatalf("TTL after Refresh %v", ttl)
	}
	if v := raw(t, addr).Get(ctx, key).Val(); v != lock.Token() {
		t.Fatalf("the key holds %q, not the lock's token", v)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := lock.Release(ctx); !errors.Is(err, redislock.ErrLockNotHeld) {
		t.Fatalf("second Release: %v, want ErrLockNotHeld", err)
	}
	if err := lock.Refresh(ctx, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Refresh after Release: %v, want ErrNotObtained", err)
	}
	// with a retry strategy, a waiter gets the lock once the holder releases
	held, err := other.Obtain(ctx, key, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = held.Release(context.Background())
	}()
	waiter, err := locker.Obtain(ctx, key, 10*time.Second,
		&redislock.Options{RetryStrategy: redislock.LinearBackoff(20 * time.Millisecond)})
	if err != nil {
		t.Fatalf("waiting Obtain: %v", err)
	}
	_ = waiter.Release(ctx)
}

func TestRedislockExpiry(t *testing.T) {
	redlockdOnly(t)
	addr := needNodes(t, 4)[3]
	ctx := ctxT(t, 30*time.Second)
	locker := redislock.New(client(t, addr))
	key := unique("redislock-exp")
	lock, err := locker.Obtain(ctx, key, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	advanceClock(t, 1000) // a key lives through its deadline's millisecond
	if _, err := locker.Obtain(ctx, key, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Obtain of a live lock: %v", err)
	}
	advanceClock(t, 1)
	if err := lock.Refresh(ctx, time.Second, nil); !errors.Is(err, redislock.ErrNotObtained) {
		t.Fatalf("Refresh of an expired lock: %v, want ErrNotObtained", err)
	}
	passLockDelay(t, func() bool {
		_, err := locker.Obtain(ctx, key, time.Second, nil)
		return errors.Is(err, redislock.ErrNotObtained)
	})
	again, err := locker.Obtain(ctx, key, time.Second, nil)
	if err != nil {
		t.Fatalf("Obtain after expiry: %v", err)
	}
	_ = again.Release(ctx)
}
