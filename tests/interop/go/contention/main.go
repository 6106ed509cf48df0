// Command contention: N goroutines contending for one redsync mutex, each with its own
// redsync.Redsync over its own 5 go-redis clients, with redsync's defaults (8 s expiry,
// 32 tries, 50-250 ms between tries, drift factor 0.01). Used by
// benches/contention_clients.py.
//
//	contention PORTS RESOURCE SECONDS N
//
// Prints "ready" once every client has pinged its nodes, waits for a line on stdin, then
// each goroutine loops for SECONDS: Lock (bounded by the deadline), Unlock on success.
// Each attempt's grants are counted by wrapping the pool's SetNX (redsync waits for all
// 5 replies of an attempt before the next one). Prints one JSON line: cycles (locks
// won), attempts, failed (Lock calls that gave up), hist (attempts by number of
// granting nodes).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// tally counts one client's SetNX replies; every len(pools) replies close an attempt.
type tally struct {
	nodes   int
	mu      sync.Mutex
	replies int
	granted int
	hist    []int64
	on      *atomic.Bool
}

func (t *tally) reply(ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replies++
	if ok {
		t.granted++
	}
	if t.replies == t.nodes {
		if t.on.Load() {
			t.hist[t.granted]++
		}
		t.replies, t.granted = 0, 0
	}
}

type countingPool struct {
	rsredis.Pool
	t *tally
}

type countingConn struct {
	rsredis.Conn
	t *tally
}

func (p countingPool) Get(ctx context.Context) (rsredis.Conn, error) {
	c, err := p.Pool.Get(ctx)
	if err != nil {
		return nil, err
	}
	return countingConn{c, p.t}, nil
}

func (c countingConn) SetNX(name, value string, expiry time.Duration) (bool, error) {
	ok, err := c.Conn.SetNX(name, value, expiry)
	c.t.reply(ok && err == nil)
	return ok, err
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: contention PORTS RESOURCE SECONDS N")
		os.Exit(2)
	}
	ports := strings.Split(os.Args[1], ",")
	resource := os.Args[2]
	seconds, err1 := strconv.ParseFloat(os.Args[3], 64)
	n, err2 := strconv.Atoi(os.Args[4])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "SECONDS and N must be numbers")
		os.Exit(2)
	}
	var on atomic.Bool
	tallies := make([]*tally, n)
	mutexes := make([]*redsync.Mutex, n)
	var clients []*goredislib.Client
	for i := range n {
		tallies[i] = &tally{nodes: len(ports), hist: make([]int64, len(ports)+1), on: &on}
		pools := make([]rsredis.Pool, 0, len(ports))
		for _, p := range ports {
			c := goredislib.NewClient(&goredislib.Options{Addr: "127.0.0.1:" + p})
			if err := c.Ping(context.Background()).Err(); err != nil {
				fmt.Fprintln(os.Stderr, "ping:", err)
				os.Exit(1)
			}
			clients = append(clients, c)
			pools = append(pools, countingPool{goredis.NewPool(c), tallies[i]})
		}
		mutexes[i] = redsync.New(pools...).NewMutex(resource)
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	on.Store(true)
	deadline := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var cycles, failed atomic.Int64
	var wg sync.WaitGroup
	for _, m := range mutexes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := m.LockContext(ctx); err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				if ctx.Err() == nil {
					cycles.Add(1)
				}
				_, _ = m.Unlock()
			}
		}()
	}
	wg.Wait()
	on.Store(false)
	hist := make([]int64, len(ports)+1)
	var attempts int64
	for _, t := range tallies {
		t.mu.Lock()
		for g, c := range t.hist {
			hist[g] += c
			attempts += c
		}
		t.mu.Unlock()
	}
	out, _ := json.Marshal(map[string]any{
		"cycles": cycles.Load(), "attempts": attempts, "failed": failed.Load(),
		"hist": hist, "seconds": seconds,
	})
	fmt.Println(string(out))
	for _, c := range clients {
		_ = c.Close()
	}
}
