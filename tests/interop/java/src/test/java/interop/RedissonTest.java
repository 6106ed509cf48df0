package interop;

import static org.junit.jupiter.api.Assertions.*;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.RedissonMultiLock;
import org.redisson.RedissonRedLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson with its default settings (only the address is set) against one node, and
 * RedissonRedLock / RedissonMultiLock over five.
 *
 * Deviations from the defaults, with reasons:
 * - watchdogKeepsLockPast30s: lockWatchdogTimeout 2000 ms instead of 30000 ms, so the
 *   watchdog renews every ~667 ms instead of every 10 s and the case runs in seconds.
 *   On redlockd the server's manual clock is moved 1900 ms at a time until 30.4 s of
 *   server time have passed; on redis-server the holder works 5 s of wall time
 *   (2.5 leases).
 * - holderKilledLockFreesAfterLease against redis-server: the killed holder ran with
 *   lockWatchdogTimeout 2000 ms (redis-server's clock cannot be moved); against
 *   redlockd it runs with the default 30 s and the clock is moved past it.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RedissonTest {
    static RedissonClient a;
    static RedissonClient b;
    static final String N0 = Env.node(0);

    @BeforeAll
    static void start() {
        a = Env.redisson(N0);
        b = Env.redisson(N0);
    }

    @AfterAll
    static void stop() {
        if (a != null) a.shutdown();
        if (b != null) b.shutdown();
    }

    /** The documents' example, as written (apart from the client's address). */
    @Test
    void documentsExampleAsWritten() throws Exception {
        RedissonClient redissonClient = Env.redisson(N0);
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream saved = System.out;
        System.setOut(new PrintStream(captured, true));
        try {
            // Acquire distributed lock
            RLock lock = redissonClient.getLock("myLock");
            try {
                // Wait up to 10 seconds, lock expires after 30 seconds
                boolean locked = lock.tryLock(10, 30, TimeUnit.SECONDS);
                if (locked) {
                    System.out.println("Lock acquired, executing business logic...");
                    // (the check below is ours: the lock is held, in a hash, for 30 s)
                    assertEquals("hash", Env.Raw.call(N0, "TYPE", "myLock"));
                    long pttl = Env.Raw.pttl(N0, "myLock");
                    assertTrue(pttl > 25_000 && pttl <= 30_000, "pttl " + pttl);
                } else {
                    System.out.println("Failed to acquire lock...");
                }
            } catch (InterruptedException e) {
                e.printStackTrace();
            } finally {
                lock.unlock();
                redissonClient.shutdown();
            }
        } finally {
            System.setOut(saved);
        }
        assertEquals("Lock acquired, executing business logic...\n", captured.toString());
        assertEquals(0L, Env.Raw.call(N0, "EXISTS", "myLock"));
        assertTrue(redissonClient.isShutdown());
    }

    /** The example under contention: a second client waits and gets the lock on release. */
    @Test
    void contentionSecondClientWaitsThenGetsIt() throws Exception {
        String name = Env.unique("contended");
        RLock la = a.getLock(name);
        assertTrue(la.tryLock(10, 30, TimeUnit.SECONDS));
        ExecutorService ex = Executors.newSingleThreadExecutor();
        try {
            CountDownLatch started = new CountDownLatch(1);
            Future<Long> waited = ex.submit(() -> {
                RLock lb = b.getLock(name);
                started.countDown();
                long t0 = System.nanoTime();
                boolean got = lb.tryLock(10, 30, TimeUnit.SECONDS);
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertTrue(got, "the waiting client did not get the lock");
                assertTrue(lb.isHeldByCurrentThread());
                lb.unlock();
                return ms;
            });
            started.await();
            // the waiter subscribes to redisson_lock__channel:{name} and waits
            assertTrue(Env.waitFor(5000, () -> {
                Object n = Env.Raw.call(N0, "PUBSUB", "NUMSUB", "redisson_lock__channel:{" + name + "}");
                return n instanceof List && ((List<?>) n).get(1).equals(1L);
            }), "the waiter never subscribed");
            // A negative check: a wrongful grant needs time to show, and the waiter is
            // Redisson's, on the wall clock (no manual clock reaches a client library).
            Thread.sleep(300);
            assertFalse(waited.isDone(), "the second client got a held lock");
            la.unlock();
            long ms = waited.get(10, TimeUnit.SECONDS);
            assertTrue(ms >= 300 && ms < 10_000, "waited " + ms + " ms");
        } finally {
            ex.shutdownNow();
        }
        assertEquals(0L, Env.Raw.call(N0, "EXISTS", name));
    }

    @Test
    @Tag("expiry")
    void lockWithWatchdogAndWithLease() throws Exception {
        String name = Env.unique("lock");
        RLock lock = a.getLock(name);
        lock.lock();
        try {
            // lock(): the watchdog's lease (30 s by default), one hold in the hash
            long pttl = Env.Raw.pttl(N0, name);
            assertTrue(pttl > 25_000 && pttl <= 30_000, "pttl " + pttl);
            @SuppressWarnings("unchecked")
            List<Object> h = (List<Object>) Env.Raw.call(N0, "HGETALL", name);
            assertEquals(2, h.size());
            assertTrue(((String) h.get(0)).endsWith(":" + Thread.currentThread().getId()), "field " + h.get(0));
            assertEquals("1", h.get(1));
            assertTrue(lock.isLocked());
            assertFalse(b.getLock(name).tryLock());
        } finally {
            lock.unlock();
        }
        assertFalse(lock.isLocked());

        lock.lock(10, TimeUnit.SECONDS);
        long pttl = Env.Raw.pttl(N0, name);
        assertTrue(pttl > 8_000 && pttl <= 10_000, "pttl " + pttl);
        if (Env.redlockd()) {
            // no watchdog for a lease: past 10 s (server time) the lock is gone
            Env.advanceClock(10_001);
            assertEquals(0L, Env.Raw.call(N0, "EXISTS", name));
            assertFalse(lock.isLocked());
            RLock other = b.getLock(name);
            Env.passLockDelay(() -> !other.tryLock());
            assertTrue(other.tryLock());
            other.unlock();
        } else {
            lock.unlock();
        }
    }

    @Test
    void watchdogKeepsLockPast30s() throws Exception {
        Config config = new Config();
        config.useSingleServer().setAddress("redis://" + N0);
        config.setLockWatchdogTimeout(2000); // deviation: see the class comment
        RedissonClient c = Redisson.create(config);
        String name = Env.unique("watchdog");
        try {
            RLock lock = c.getLock(name);
            lock.lock();
            if (Env.redlockd()) {
                long serverMs = 0;
                while (serverMs <= 30_000) {
                    Env.advanceClock(1900);
                    serverMs += 1900;
                    assertTrue(Env.Raw.pttl(N0, name) > 0, "lock lost after " + serverMs + " ms");
                    // the watchdog renews to the full 2000 ms
                    assertTrue(Env.waitFor(3000, () -> Env.Raw.pttl(N0, name) > 1900),
                            "no renewal after " + serverMs + " ms of server time");
                }
            } else {
                // redis-server has no manual clock: the oracle run watches 5 s of real time.
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (System.nanoTime() < end) {
                    assertTrue(Env.Raw.pttl(N0, name) > 0, "lock lost");
                    Thread.sleep(50);
                }
            }
            assertTrue(lock.isHeldByCurrentThread());
            assertFalse(b.getLock(name).tryLock());
            lock.unlock();
            assertEquals(0L, Env.Raw.call(N0, "EXISTS", name));
        } finally {
            c.shutdown();
        }
    }

    @Test
    void reentrancyAndNonOwnerUnlock() throws Exception {
        String name = Env.unique("reentrant");
        RLock lock = a.getLock(name);
        lock.lock();
        lock.lock();
        assertEquals(2, lock.getHoldCount());
        @SuppressWarnings("unchecked")
        List<Object> h = (List<Object>) Env.Raw.call(N0, "HGETALL", name);
        assertEquals("2", h.get(1));
        // another client (and another thread of this one) is not the owner
        RLock foreign = b.getLock(name);
        assertThrows(IllegalMonitorStateException.class, foreign::unlock);
        ExecutorService ex = Executors.newSingleThreadExecutor();
        try {
            Future<?> f = ex.submit(() -> assertThrows(IllegalMonitorStateException.class, lock::unlock));
            f.get(10, TimeUnit.SECONDS);
        } finally {
            ex.shutdownNow();
        }
        lock.unlock();
        assertEquals(1, lock.getHoldCount());
        assertTrue(lock.isLocked());
        lock.unlock();
        assertFalse(lock.isLocked());
        assertEquals(0L, Env.Raw.call(N0, "EXISTS", name));
        assertThrows(IllegalMonitorStateException.class, lock::unlock);
    }

    @Test
    void fairLockServesWaitersInOrder() throws Exception {
        String name = Env.unique("fair");
        RLock holder = a.getFairLock(name);
        holder.lock();
        List<Integer> order = Collections.synchronizedList(new ArrayList<>());
        int waiters = 3;
        ExecutorService ex = Executors.newFixedThreadPool(waiters);
        List<Future<?>> fs = new ArrayList<>();
        try {
            for (int i = 0; i < waiters; i++) {
                final int id = i;
                fs.add(ex.submit(() -> {
                    RLock l = b.getFairLock(name);
                    assertTrue(l.tryLock(30, 30, TimeUnit.SECONDS));
                    order.add(id);
                    l.unlock();
                    return null;
                }));
                final long queued = i + 1;
                // the next waiter joins only once this one is in the queue
                assertTrue(Env.waitFor(5000, () -> Long.valueOf(queued).equals(
                        Env.Raw.call(N0, "LLEN", "redisson_lock_queue:{" + name + "}"))), "waiter " + i + " not queued");
            }
            holder.unlock();
            for (Future<?> f : fs) f.get(30, TimeUnit.SECONDS);
        } finally {
            ex.shutdownNow();
        }
        assertEquals(List.of(0, 1, 2), order);
    }

    @Test
    void readWriteLock() throws Exception {
        String name = Env.unique("rw");
        RReadWriteLock rwA = a.getReadWriteLock(name);
        RReadWriteLock rwB = b.getReadWriteLock(name);
        rwA.readLock().lock();
        assertTrue(rwB.readLock().tryLock(0, 30, TimeUnit.SECONDS), "readers share");
        assertFalse(rwB.writeLock().tryLock(0, 30, TimeUnit.SECONDS), "a writer got in beside readers");
        rwA.readLock().unlock();
        rwB.readLock().unlock();
        assertTrue(rwB.writeLock().tryLock(0, 30, TimeUnit.SECONDS));
        ExecutorService ex = Executors.newSingleThreadExecutor();
        try {
            assertFalse(ex.submit(() -> rwA.readLock().tryLock(0, 30, TimeUnit.SECONDS)).get(10, TimeUnit.SECONDS),
                    "a reader got in beside a writer");
        } finally {
            ex.shutdownNow();
        }
        rwB.writeLock().unlock();
        assertEquals(0L, Env.Raw.call(N0, "EXISTS", name));
    }

    @Test
    void semaphore() throws Exception {
        String name = Env.unique("sem");
        RSemaphore s = a.getSemaphore(name);
        assertTrue(s.trySetPermits(2));
        assertFalse(s.trySetPermits(5));
        s.acquire();
        RSemaphore sb = b.getSemaphore(name);
        assertTrue(sb.tryAcquire());
        assertFalse(sb.tryAcquire());
        assertEquals(0, s.availablePermits());
        ExecutorService ex = Executors.newSingleThreadExecutor();
        try {
            Future<Boolean> waiter = ex.submit(() -> sb.tryAcquire(10, TimeUnit.SECONDS));
            assertTrue(Env.waitFor(5000, () -> Env.subscribed(name, N0)), "the waiter never subscribed");
            assertFalse(waiter.isDone());
            s.release();
            assertTrue(waiter.get(10, TimeUnit.SECONDS));
        } finally {
            ex.shutdownNow();
        }
        sb.release(2);
        assertEquals(2, s.availablePermits());
        s.delete();
    }

    @Test
    void permitExpirableSemaphore() throws Exception {
        String name = Env.unique("pes");
        RPermitExpirableSemaphore s = a.getPermitExpirableSemaphore(name);
        assertTrue(s.trySetPermits(1));
        String id = s.acquire();
        assertNotNull(id);
        RPermitExpirableSemaphore sb = b.getPermitExpirableSemaphore(name);
        assertNull(sb.tryAcquire());
        assertEquals(0, sb.availablePermits());
        assertFalse(sb.tryRelease("0123456789abcdef"), "released a permit it does not hold");
        s.release(id);
        String id2 = sb.tryAcquire(1, 30, TimeUnit.SECONDS);
        assertNotNull(id2);
        assertNotEquals(id, id2);
        sb.release(id2);
        assertEquals(1, s.availablePermits());
        s.delete();
    }

    @Test
    void countDownLatch() throws Exception {
        String name = Env.unique("latch");
        RCountDownLatch l = a.getCountDownLatch(name);
        assertTrue(l.trySetCount(2));
        ExecutorService ex = Executors.newSingleThreadExecutor();
        try {
            Future<Boolean> waiter = ex.submit(() -> b.getCountDownLatch(name).await(20, TimeUnit.SECONDS));
            assertTrue(Env.waitFor(5000, () -> Env.subscribed(name, N0)), "the waiter never subscribed");
            l.countDown();
            // A negative check (one count left: the waiter must not wake) needs time to
            // show a wrongful wake; the waiter is Redisson's, on the wall clock.
            Thread.sleep(50);
            assertFalse(waiter.isDone());
            assertEquals(1, l.getCount());
            b.getCountDownLatch(name).countDown();
            assertTrue(waiter.get(20, TimeUnit.SECONDS));
        } finally {
            ex.shutdownNow();
        }
        assertEquals(0, l.getCount());
    }

    @Test
    void fencedLockTokensIncrease() throws Exception {
        String name = Env.unique("fenced");
        RFencedLock fa = a.getFencedLock(name);
        RFencedLock fb = b.getFencedLock(name);
        Long t1 = fa.lockAndGetToken();
        assertNotNull(t1);
        assertEquals(t1, fa.getToken());
        // (the no-argument tryLockAndGetToken() of 3.52 waits for the lock: it blocks here,
        // against redis-server too, so the case asks with a wait of 0)
        assertNull(fb.tryLockAndGetToken(0, 30, TimeUnit.SECONDS), "a held fenced lock was given out");
        fa.unlock();
        Long t2 = fb.tryLockAndGetToken(1, 30, TimeUnit.SECONDS);
        assertNotNull(t2);
        assertTrue(t2 > t1, t1 + " then " + t2);
        fb.unlock();
        Long t3 = fa.lockAndGetToken();
        assertTrue(t3 > t2, t2 + " then " + t3);
        fa.unlock();
    }

    /** RedissonRedLock over five nodes, two of them killed: the majority still locks;
     * RedissonMultiLock (all locks required) then fails. Three shared nodes and two of
     * the case's own, which it kills. */
    @Test
    void redLockAndMultiLockOverFiveWithTwoKilled() throws Exception {
        String name = Env.unique("multi");
        List<RedissonClient> clients = new ArrayList<>();
        try (Env.Node d1 = new Env.Node(); Env.Node d2 = new Env.Node()) {
            List<String> addrs = List.of(Env.node(0), Env.node(1), Env.node(2), d1.addr, d2.addr);
            for (String addr : addrs) clients.add(Env.redisson(addr));
            RLock[] locks = clients.stream().map(c -> c.getLock(name)).toArray(RLock[]::new);

            // all five up: both lock and unlock
            RedissonMultiLock all = new RedissonMultiLock(locks);
            assertTrue(all.tryLock(10, 30, TimeUnit.SECONDS));
            for (String addr : addrs) assertEquals(1L, Env.Raw.call(addr, "EXISTS", name));
            all.unlock();
            for (String addr : addrs) assertEquals(0L, Env.Raw.call(addr, "EXISTS", name));

            d1.kill();
            d2.kill();
            @SuppressWarnings("deprecation")
            RedissonRedLock red = new RedissonRedLock(locks);
            // (MultiLock's tryLock(wait, lease) first takes every node's lock for 2 x wait:
            // a wait of 10 s asks for 20 s, within redlockd's default max-ttl of 30 s)
            assertTrue(red.tryLock(10, 30, TimeUnit.SECONDS), "3 of 5 nodes up: the RedLock must lock");
            for (int i = 0; i < 3; i++) assertEquals(1L, Env.Raw.call(addrs.get(i), "EXISTS", name));
            red.unlock();
            for (int i = 0; i < 3; i++) assertEquals(0L, Env.Raw.call(addrs.get(i), "EXISTS", name));

            RedissonMultiLock multi = new RedissonMultiLock(locks);
            long t0 = System.nanoTime();
            assertFalse(multi.tryLock(5, 30, TimeUnit.SECONDS), "MultiLock needs every node");
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertTrue(ms < 30_000, "tryLock(5 s) took " + ms + " ms");
            for (int i = 0; i < 3; i++) assertEquals(0L, Env.Raw.call(addrs.get(i), "EXISTS", name));
        } finally {
            for (RedissonClient c : clients) c.shutdown();
        }
    }

    /** redlockd refuses a TTL above its --max-ttl (30 s by default) with a clear error:
     * Redisson rethrows it from tryLock with a longer lease; a RedissonMultiLock whose
     * tryLock(wait, lease) first asks every node for 2 x wait (here 30.002 s) locks
     * nothing, after waiting its whole wait (15 s). */
    @Test
    void leaseAboveMaxTtlIsRefusedClearly() throws Exception {
        Env.assumeRedlockd();
        String name = Env.unique("maxttl");
        RLock lock = a.getLock(name);
        org.redisson.client.RedisException e = assertThrows(org.redisson.client.RedisException.class,
                () -> lock.tryLock(0, 31, TimeUnit.SECONDS));
        assertTrue(e.getMessage().contains("ERR TTL of 31000 ms is above this server's max-ttl of 30000 ms"),
                e.getMessage());
        // A hazard, asserted so that a change shows here: Redisson's lock script runs
        // hincrby before pexpire, and a script is not rolled back when a later call
        // fails, so the refused tryLock leaves the lock's hash WITHOUT a TTL, held by
        // this thread (whose caller was told the lock failed). Only this thread's
        // unlock() (or forceUnlock) frees it.
        assertEquals(-1L, Env.Raw.pttl(N0, name));
        assertFalse(b.getLock(name).tryLock(), "the leftover hash holds the lock");
        lock.unlock();
        assertEquals(0L, Env.Raw.call(N0, "EXISTS", name));
        assertTrue(lock.tryLock(0, 30, TimeUnit.SECONDS), "a 30 s lease is within max-ttl");
        lock.unlock();

        List<RedissonClient> clients = new ArrayList<>();
        try {
            for (String addr : Env.NODES) clients.add(Env.redisson(addr));
            RedissonMultiLock multi = new RedissonMultiLock(
                    clients.stream().map(c -> c.getLock(name)).toArray(RLock[]::new));
            boolean got;
            try {
                got = multi.tryLock(15_001, 30_000, TimeUnit.MILLISECONDS);
            } catch (org.redisson.client.RedisException refused) {
                assertTrue(refused.getMessage().contains("above this server's max-ttl"), refused.getMessage());
                got = false;
            }
            assertFalse(got, "a 30.002 s per-node lease was granted");
            List<Object> left = new ArrayList<>();
            for (String addr : Env.NODES) left.add(Env.Raw.pttl(addr, name));
            // the same hazard on the first node, the one MultiLock tried (and retried)
            assertEquals(List.of(-1L, -2L, -2L, -2L, -2L), left, "keys left on the nodes (pttl)");
            clients.get(0).getLock(name).forceUnlock();
            assertEquals(0L, Env.Raw.call(Env.node(0), "EXISTS", name));
        } finally {
            for (RedissonClient c : clients) c.shutdown();
        }
    }

    /** A holder process is killed with its lock held: its watchdog stops, and the lock
     * frees once the last lease runs out. */
    @Test
    @Tag("expiry")
    void holderKilledLockFreesAfterLease() throws Exception {
        String name = Env.unique("killed");
        long watchdog = Env.redlockd() ? 30_000 : 2_000; // see the class comment
        String java = ProcessHandle.current().info().command().orElse("java");
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                "interop.LockHolder", N0, name, Long.toString(watchdog));
        pb.redirectErrorStream(true);
        pb.redirectOutput(new File(Env.LOG_DIR, "java-holder.log"));
        Process p = pb.start();
        try {
            assertTrue(Env.waitFor(60_000, () -> (Long) Env.Raw.call(N0, "EXISTS", name) == 1L), "holder never locked");
            assertTrue(Env.waitFor(60_000, () -> new File(Env.LOG_DIR, "java-holder.log").length() > 0),
                    "holder never said it locked");
            p.destroyForcibly();
            assertTrue(p.waitFor(10, TimeUnit.SECONDS));
            RLock lock = a.getLock(name);
            assertFalse(lock.tryLock(), "the killed holder's lock was free at once");
            long pttl = Env.Raw.pttl(N0, name);
            assertTrue(pttl > 0 && pttl <= watchdog, "pttl " + pttl);
            if (Env.redlockd()) {
                Env.advanceClock(pttl); // a key lives through its deadline's millisecond
                assertFalse(lock.tryLock(), "freed before the lease ran out");
                Env.advanceClock(1);
                Env.passLockDelay(() -> !lock.tryLock());
            }
            assertTrue(lock.tryLock(watchdog + 5_000, 30_000, TimeUnit.MILLISECONDS), "the lock never freed");
            lock.unlock();
        } finally {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    /**
     * redlockd's --lock-delay 5s, on a node of its own: an RLock whose lease ran out
     * (lock(2, SECONDS): a lease, so no watchdog renews it) is refused to a second
     * Redisson client until the delay has passed, and its first holder's unlock() finds
     * it lost the lock; an RLock released with unlock() goes to the next client at once
     * (a tryLock, and a waiter woken by the unlock message), with no time passing. With
     * the delay set to 0 (CONFIG SET, live) an expired lease is free at once.
     */
    @Test
    void lockDelayRefusesAnExpiredLeaseNotAnUnlockedLock() throws Exception {
        Assumptions.assumeTrue(Env.redlockd(), "needs redlockd's --lock-delay (Redis has none) and manual clock");
        try (Env.Node node = new Env.Node(List.of("--lock-delay", "5s"))) {
            RedissonClient ca = Env.redisson(node.addr);
            RedissonClient cb = Env.redisson(node.addr);
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                String name = Env.unique("lock-delay");
                RLock first = ca.getLock(name);
                RLock second = cb.getLock(name);
                first.lock(2, TimeUnit.SECONDS);
                assertEquals(2_000L, Env.Raw.pttl(node.addr, name));
                assertFalse(second.tryLock(), "a held lock was granted");
                // The lease runs out: the key lives through its deadline's millisecond.
                Env.advanceClock(node.addr, 2_000);
                assertFalse(second.tryLock(), "granted before the lease ran out");
                Env.advanceClock(node.addr, 1);
                assertFalse(first.isLocked(), "the expired lock reads as held");
                assertFalse(second.tryLock(), "the expired lock was granted during the lock-delay");
                // Its holder, resumed, finds it lost the lock; nobody was granted it.
                assertThrows(IllegalMonitorStateException.class, first::unlock);
                assertFalse(second.tryLock(), "granted after the old holder's unlock");
                // The delay ends 5 s after the deadline.
                Env.advanceClock(node.addr, 4_999);
                assertFalse(second.tryLock(), "granted in the lock-delay's last millisecond");
                Env.advanceClock(node.addr, 1);
                assertTrue(second.tryLock(0, 2, TimeUnit.SECONDS), "not granted after the lock-delay");
                assertTrue(second.isHeldByCurrentThread());

                // Released by its holder: free at once (the clock stands still).
                second.unlock();
                assertTrue(first.tryLock(0, 2, TimeUnit.SECONDS), "the unlocked lock was refused");
                // A waiter parked on Redisson's pub/sub: the manual clock does not move, so
                // only the unlock can free the lock it waits for.
                Future<Boolean> waiter = ex.submit(() -> {
                    RLock w = cb.getLock(name);
                    boolean got = w.tryLock(30, 2, TimeUnit.SECONDS);
                    if (got) w.unlock();
                    return got;
                });
                assertTrue(Env.waitFor(10_000, () -> Env.subscribed(name, node.addr)), "the waiter never subscribed");
                first.unlock();
                assertTrue(waiter.get(30, TimeUnit.SECONDS), "the waiter did not get the unlocked lock");
                assertEquals(0L, Env.Raw.call(node.addr, "EXISTS", name));

                // The delay off: an expired lease goes to the next client at once.
                assertEquals("OK", Env.Raw.call(node.addr, "CONFIG", "SET", "lock-delay", "0"));
                first.lock(2, TimeUnit.SECONDS);
                Env.advanceClock(node.addr, 2_001);
                assertTrue(second.tryLock(0, 2, TimeUnit.SECONDS), "with the delay off the expired lock was refused");
                second.unlock();
            } finally {
                ex.shutdownNow();
                ca.shutdown();
                cb.shutdown();
            }
        }
    }
}
