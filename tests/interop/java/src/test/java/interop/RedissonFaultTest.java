package interop;

import static org.junit.jupiter.api.Assertions.*;

import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson against scoped faults of `redlockd harness` (docs/testing.md, "Scoped
 * faults"), driven over its JSON protocol (Harness). redlockd only.
 *
 * Deviations from the defaults, with reasons: lockWatchdogTimeout 2000 ms instead of
 * 30000 ms (the watchdog renews after ~667 ms of real time instead of 10 s; the lease
 * is moved on the manual clock, so only the renewal period changes), and the holder's
 * client name "holder" (CLIENT SETNAME), so the fault is scoped to its connections.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RedissonFaultTest {
    /**
     * The watchdog's renewal (EVALSHA of a script calling pexpire) is answered 5 s
     * late: the lease runs out on the server and a second client takes the lock, while
     * the holder's thread, whose lock() returned long ago, is told nothing: two holders.
     */
    @Test
    void watchdogRenewalDelayedPastLease() throws Exception {
        Env.assumeRedlockd();
        try (Harness h = new Harness(1)) {
            String node = h.addrs.get(0);
            Config config = new Config();
            config.useSingleServer().setAddress("redis://" + node).setClientName("holder");
            config.setLockWatchdogTimeout(2000); // deviation: see the class comment
            RedissonClient a = Redisson.create(config);
            RedissonClient b = Env.redisson(node);
            try {
                String name = Env.unique("renewal-delayed");
                RLock lock = a.getLock(name);
                h.call("record");
                lock.lock();
                // the watchdog's first renewal (~667 ms after lock()) loads its script
                // (EVALSHA -> NOSCRIPT -> SCRIPT LOAD -> EVALSHA); the next one is delayed
                assertTrue(Env.waitFor(5000, () -> renewed(h, name)), "no renewal");
                JsonNode f = h.call("fault", "node", 0, "action", "delay", "ms", 5_000, "clock", "manual",
                        "command", "evalsha", "key", name, "client_name", "holder", "count", 1);
                int id = f.get("fault").asInt();
                // the watchdog's next renewal, ~667 ms later, is the one delayed
                assertTrue(Env.waitFor(5000, () -> status(h, id).get("fired").asLong() == 1), "the renewal was not delayed");
                h.advance(2001); // the lease (2000 ms from the renewal's run) is over
                assertEquals(0L, Env.Raw.call(node, "EXISTS", name));
                RLock other = b.getLock(name);
                assertTrue(other.tryLock(), "a second client gets the lock");
                // isHeldByCurrentThread() asks the server (HEXISTS): it says false, but
                // nothing told the holder's thread, which runs on as if it held the lock
                assertFalse(lock.isHeldByCurrentThread());
                assertTrue(other.isHeldByCurrentThread());

                h.advance(3_000); // the delayed reply arrives (5 s after the renewal ran)
                JsonNode st = status(h, id);
                assertEquals(1, st.get("fired").asLong());
                JsonNode firing = st.get("firings").get(0);
                assertEquals("holder", firing.get("client").get("name").asText());
                assertEquals("EVALSHA", firing.get("command").get(0).asText());
                assertEquals(name, firing.get("command").get(3).asText());
                assertEquals("2000", firing.get("command").get(4).asText(), "the renewal's pexpire");
                // the delayed renewal did run: it renewed the holder's hash (reply [1])
                boolean seen = false;
                for (JsonNode e : h.call("history")) {
                    if (e.get("fault").isNull()) continue;
                    assertEquals("[1]", e.get("reply").toString(), "the delayed renewal's reply");
                    seen = true;
                }
                assertTrue(seen, "the delayed exchange is in the history");
                // the holder finds out only when it unlocks
                assertThrows(IllegalMonitorStateException.class, lock::unlock);
                assertTrue(other.isHeldByCurrentThread());
                other.unlock();
                assertEquals(0L, Env.Raw.call(node, "EXISTS", name));
            } finally {
                a.shutdown();
                b.shutdown();
            }
        }
    }

    /** Whether the history has a renewal of the lock answered [1] (it ran: pexpire). */
    private static boolean renewed(Harness h, String name) {
        try {
            for (JsonNode e : h.call("history")) {
                JsonNode c = e.get("command");
                if (c.get(0).asText().equalsIgnoreCase("evalsha") && c.size() > 4 && c.get(3).asText().equals(name)
                        && c.get(4).asText().equals("2000") && e.get("reply").toString().equals("[1]")) return true;
            }
            return false;
        } catch (java.io.IOException e) {
            throw new RuntimeException(e);
        }
    }

    private static JsonNode status(Harness h, int id) {
        try {
            for (JsonNode f : h.call("faults", "node", 0)) {
                if (f.get("fault").asInt() == id) return f;
            }
            throw new AssertionError("fault " + id + " is not listed");
        } catch (java.io.IOException e) {
            throw new RuntimeException(e);
        }
    }
}
