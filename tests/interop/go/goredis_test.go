package interop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// go-redis v9 with its defaults: HELLO 3 (RESP3), MULTI/EXEC through TxPipelined, and
// optimistic locking with WATCH. No deviations.

func TestGoRedisSpeaksResp3(t *testing.T) {
	c := client(t, needNodes(t, 5)[4])
	info, err := c.Do(context.Background(), "CLIENT", "INFO").Text()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Fields(info), "resp=3") {
		t.Fatalf("go-redis did not get RESP3: %s", info)
	}
}

func TestGoRedisTxPipelined(t *testing.T) {
	c := client(t, needNodes(t, 5)[4])
	ctx := ctxT(t, 10*time.Second)
	key := unique("gotx")
	var set *redis.StatusCmd
	var incr *redis.IntCmd
	var get *redis.StringCmd
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		set = p.SetArgs(ctx, key, "v", redis.SetArgs{Mode: "NX", TTL: 10 * time.Second})
		incr = p.Incr(ctx, key+":n")
		get = p.Get(ctx, key)
		return nil
	})
	if err != nil {
		t.Fatalf("TxPipelined: %v", err)
	}
	if len(cmds) != 3 || set.Val() != "OK" || incr.Val() != 1 || get.Val() != "v" {
		t.Fatalf("results %v", cmds)
	}
	// an error inside EXEC is that command's, the others run
	cmds, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, key) // "v" is not an integer
		p.Incr(ctx, key+":n")
		return nil
	})
	if err == nil || !strings.HasPrefix(err.Error(), "ERR value is not an integer") {
		t.Fatalf("TxPipelined with a failing command: %v", err)
	}
	if cmds[1].(*redis.IntCmd).Val() != 2 {
		t.Fatalf("the second command's result %v", cmds[1])
	}
	c.Del(ctx, key, key+":n")
}

func TestGoRedisWatch(t *testing.T) {
	addr := needNodes(t, 5)[4]
	c := client(t, addr)
	other := client(t, addr)
	ctx := ctxT(t, 10*time.Second)
	key := unique("gowatch")
	c.Set(ctx, key, "0", 0)

	// another client writes between WATCH and EXEC: the transaction fails
	err := c.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, key).Int()
		if err != nil {
			return err
		}
		other.Set(ctx, key, "100", 0)
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, v+1, 0)
			return nil
		})
		return err
	}, key)
	if !errors.Is(err, redis.TxFailedErr) {
		t.Fatalf("Watch with a concurrent write: %v, want TxFailedErr", err)
	}
	if v := c.Get(ctx, key).Val(); v != "100" {
		t.Fatalf("value %q", v)
	}
	// undisturbed, the same transaction commits
	err = c.Watch(ctx, func(tx *redis.Tx) error {
		v, err := tx.Get(ctx, key).Int()
		if err != nil {
			return err
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, key, v+1, 0)
			return nil
		})
		return err
	}, key)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if v := c.Get(ctx, key).Val(); v != "101" {
		t.Fatalf("value %q", v)
	}
	c.Del(ctx, key)
}
