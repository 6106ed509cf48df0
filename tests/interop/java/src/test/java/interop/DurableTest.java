package interop;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.api.RFencedLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * What a `kill -9` keeps (issue 45, docs/operations.md "Durable keys: the append-only
 * log"), through Redisson with its defaults, on a node of the case's own: redlockd with
 * its default flags (a fresh dir declared with `redlockd init`), redis-server with
 * appendonly yes, appendfsync always. Killed with SIGKILL, started again on the same
 * port and dir.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DurableTest {
    /**
     * RFencedLock keeps its fencing tokens in an INCR counter with no TTL: after a crash
     * the next token is larger than every token handed out before, so storage guarded
     * by the tokens still refuses the pre-crash holder.
     */
    @Test
    void fencedLockTokensKeepGrowingAcrossACrash() throws Exception {
        Path dir = Files.createTempDirectory(Path.of(Env.LOG_DIR), "java-durable-");
        if (Env.redlockd()) {
            Process init = new ProcessBuilder(Env.BIN, "init", "--dir", dir.toString())
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            assertTrue(init.waitFor(10, TimeUnit.SECONDS), "redlockd init ended");
            assertEquals(0, init.exitValue(), "redlockd init");
        }
        int port = Env.Node.freePort();
        String name = Env.unique("fenced");
        long last = 0;
        try (Env.Node node = Env.Node.durable(port, dir.toString())) {
            RedissonClient r = shortLeases(node.addr);
            try {
                RFencedLock lock = r.getFencedLock(name);
                // Taken three times (reentrant: each take is a new token), never unlocked:
                // the holder crashes with the server.
                for (int i = 0; i < 3; i++) {
                    Long token = lock.lockAndGetToken();
                    assertNotNull(token);
                    assertTrue(token > last, "token " + token + " after " + last);
                    last = token;
                }
            } finally {
                r.shutdown();
            }
            node.kill();
        }
        try (Env.Node node = Env.Node.durable(port, dir.toString())) {
            RedissonClient r = shortLeases(node.addr);
            try {
                RFencedLock lock = r.getFencedLock(name);
                Long token = afterFence(lock::tryLockAndGetToken);
                // redlockd: the 1 s lock was memory-only, forgotten and covered by the
                // fence; redis-server: kept, and expired within its second
                assertNotNull(token, "the lock is free after the restart");
                assertTrue(token > last, "token " + token + " after the crash, " + last + " before it");
                assertTrue(lock.isHeldByCurrentThread());
                lock.unlock();
            } finally {
                r.shutdown();
            }
        }
    }

    /**
     * Redisson's defaults but one deviation: lockWatchdogTimeout 1000 ms instead of
     * 30000 ms, the lease of a lock taken without one (lockAndGetToken(leaseTime) in
     * 3.52 still sets the watchdog's lease). The crashed holder's lock then lives 1 s,
     * so the restart fence that covers it lasts ~1 s instead of 31 s, and a restarted
     * redis-server, which kept it, frees it as soon; the tokens come from the same
     * INCR either way.
     */
    private static RedissonClient shortLeases(String addr) {
        Config config = new Config();
        config.useSingleServer().setAddress("redis://" + addr);
        config.setLockWatchdogTimeout(1000);
        return Redisson.create(config);
    }

    /**
     * redlockd's restart fence refuses writes (TRYAGAIN) for as long as the memory-only
     * locks it may have granted could live (the 1 s leases here, + margin); a client
     * retries. Bounded by the fence's ceiling of 61 s.
     */
    private static <T> T afterFence(java.util.function.Supplier<T> write) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(62);
        while (true) {
            try {
                return write.get();
            } catch (RuntimeException e) {
                boolean fenced = String.valueOf(e.getMessage()).contains("TRYAGAIN")
                        || (e.getCause() != null && String.valueOf(e.getCause().getMessage()).contains("TRYAGAIN"));
                if (!Env.redlockd() || !fenced || System.nanoTime() > end) throw e;
                Thread.sleep(20);
            }
        }
    }
}
