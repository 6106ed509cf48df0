package interop

// asynq (github.com/hibiken/asynq), its default settings, on a node of the case's own
// started with the server's default flags (issue 45): its scripts keep a unique task's
// key for the uniqueness TTL (1 h here) and the daily processed/failed counters with
// EXPIREAT now+90 days, far above redlockd's default max-ttl of 5 min; such keys are
// durable (docs/operations.md "Durable keys: the append-only log"), granted whatever
// the max-ttl and kept across a crash. redis-server runs with appendonly yes,
// appendfsync always: the setting a Redis user who needs the queue to survive picks.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
)

// startDurableNode starts a node on port with its data in dir: redlockd with its
// default flags (dir declared new with `redlockd init` on the first start),
// redis-server with the log on.
func startDurableNode(t *testing.T, port int, dir string) *node {
	t.Helper()
	if !isRedlockd() {
		return launch(t, port, []string{"--dir", dir, "--save", "", "--appendonly", "yes",
			"--appendfsync", "always", "--daemonize", "no"})
	}
	if _, err := os.Stat(filepath.Join(dir, "node.state")); errors.Is(err, os.ErrNotExist) {
		if out, err := exec.Command(bin, "init", "--dir", dir).CombinedOutput(); err != nil {
			t.Fatalf("redlockd init: %v: %s", err, out)
		}
	}
	return launch(t, port, []string{"--dir", dir})
}

// afterFence waits (bounded by the fence's 61 s ceiling) until a restarted redlockd
// accepts writes: its restart fence answers TRYAGAIN while memory-only keys it may
// have granted could live.
func afterFence(t *testing.T, addr string) {
	t.Helper()
	c := raw(t, addr)
	deadline := time.Now().Add(62 * time.Second)
	for {
		err := c.Set(ctxT(t, 5*time.Second), unique("fence-probe"), "x", time.Second).Err()
		if err == nil {
			return
		}
		if !strings.HasPrefix(err.Error(), "TRYAGAIN") || time.Now().After(deadline) {
			t.Fatalf("write after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func asynqOpt(addr string) asynq.RedisClientOpt { return asynq.RedisClientOpt{Addr: addr} }

// A unique task (asynq.Unique(1 h)) is enqueued once, its duplicate refused; after a
// kill -9 and a restart the task is still pending and the duplicate still refused.
func TestAsynqUniqueTaskOnDefaultFlagsSurvivesACrash(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	n := startDurableNode(t, port, dir)
	client := asynq.NewClient(asynqOpt(n.addr))
	task := asynq.NewTask("email:welcome", []byte(`{"user":42}`))
	info, err := client.Enqueue(task, asynq.Unique(time.Hour))
	if err != nil {
		t.Fatalf("enqueue with Unique(1h): %v", err)
	}
	if _, err := client.Enqueue(task, asynq.Unique(time.Hour)); !errors.Is(err, asynq.ErrDuplicateTask) {
		t.Fatalf("the duplicate: want ErrDuplicateTask, got %v", err)
	}
	uniq, err := raw(t, n.addr).Keys(ctxT(t, 5*time.Second), "asynq:{default}:unique:*").Result()
	if err != nil || len(uniq) != 1 {
		t.Fatalf("unique keys: %v %v", uniq, err)
	}
	ttl := raw(t, n.addr).PTTL(ctxT(t, 5*time.Second), uniq[0]).Val()
	if ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("unique key TTL %v, want about 1 h", ttl)
	}
	_ = client.Close()

	n.kill()
	n = startDurableNode(t, port, dir)
	if isRedlockd() {
		afterFence(t, n.addr)
	}
	client = asynq.NewClient(asynqOpt(n.addr))
	defer client.Close()
	if _, err := client.Enqueue(task, asynq.Unique(time.Hour)); !errors.Is(err, asynq.ErrDuplicateTask) {
		t.Fatalf("the duplicate after the crash: want ErrDuplicateTask, got %v", err)
	}
	inspector := asynq.NewInspector(asynqOpt(n.addr))
	defer inspector.Close()
	back, err := inspector.GetTaskInfo("default", info.ID)
	if err != nil {
		t.Fatalf("the task after the crash: %v", err)
	}
	if back.State != asynq.TaskStatePending || string(back.Payload) != `{"user":42}` {
		t.Fatalf("the task after the crash: state %v payload %q", back.State, back.Payload)
	}
}

// A server processes two tasks, one failing: the daily processed/failed counters
// (EXPIREAT now+90 days) are written, so Inspector counts them, with that deadline.
func TestAsynqDailyStatsOnDefaultFlags(t *testing.T) {
	n := startDurableNode(t, freePort(t), t.TempDir())
	client := asynq.NewClient(asynqOpt(n.addr))
	defer client.Close()
	for _, kind := range []string{"ok", "fail"} {
		if _, err := client.Enqueue(asynq.NewTask(kind, nil), asynq.MaxRetry(0)); err != nil {
			t.Fatalf("enqueue %s: %v", kind, err)
		}
	}
	var handled atomic.Int32
	srv := asynq.NewServer(asynqOpt(n.addr), asynq.Config{Concurrency: 2, LogLevel: asynq.FatalLevel})
	err := srv.Start(asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		defer handled.Add(1)
		if task.Type() == "fail" {
			return errors.New("this task fails")
		}
		return nil
	}))
	if err != nil {
		t.Fatalf("server start: %v", err)
	}
	defer srv.Shutdown()
	inspector := asynq.NewInspector(asynqOpt(n.addr))
	defer inspector.Close()
	deadline := time.Now().Add(20 * time.Second)
	var q *asynq.QueueInfo
	for {
		q, err = inspector.GetQueueInfo("default")
		if err == nil && q.Processed == 2 && q.Failed == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue info after 20 s: %+v %v (handled %d)", q, err, handled.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if q.Archived != 1 || q.Pending != 0 {
		t.Fatalf("queue info: %+v", q)
	}
	day := time.Now().UTC().Format("2006-01-02")
	for _, key := range []string{"asynq:{default}:processed:" + day, "asynq:{default}:failed:" + day} {
		at := raw(t, n.addr).ExpireTime(ctxT(t, 5*time.Second), key).Val()
		left := time.Until(time.Unix(int64(at/time.Second), 0))
		if left < 89*24*time.Hour || left > 91*24*time.Hour {
			t.Fatalf("%s expires in %v, want about 90 days", key, left)
		}
	}
}
