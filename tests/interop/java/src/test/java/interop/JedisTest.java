package interop;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.params.SetParams;

/** Jedis with its defaults: a JedisPool (RESP2), the classic SET NX PX lock and a
 * compare-and-delete EVAL release. No deviations. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class JedisTest {
    static final String RELEASE =
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    @Test
    void setNxPxAndEvalRelease() {
        String addr = Env.node(1);
        String key = Env.unique("jedis");
        try (JedisPool pool = new JedisPool(Env.host(addr), Env.port(addr))) {
            try (Jedis j = pool.getResource(); Jedis other = pool.getResource()) {
                assertEquals("OK", j.set(key, "token-a", SetParams.setParams().nx().px(10_000)));
                assertNull(other.set(key, "token-b", SetParams.setParams().nx().px(10_000)), "second SET NX won");
                long pttl = j.pttl(key);
                assertTrue(pttl > 9_000 && pttl <= 10_000, "pttl " + pttl);
                assertEquals(0L, other.eval(RELEASE, List.of(key), List.of("token-b")), "non-owner released");
                assertEquals("token-a", j.get(key));
                assertEquals(1L, j.eval(RELEASE, List.of(key), List.of("token-a")));
                assertFalse(j.exists(key));
                assertEquals("OK", other.set(key, "token-b", SetParams.setParams().nx().px(10_000)));
                assertEquals(1L, other.eval(RELEASE, List.of(key), List.of("token-b")));
            }
            // the pool hands the same connections back: they still work
            try (Jedis j = pool.getResource()) {
                assertEquals("PONG", j.ping());
            }
        }
    }

    @Test
    @Tag("expiry")
    void expiryFreesTheLock() {
        Env.assumeRedlockd();
        String addr = Env.node(1);
        String key = Env.unique("jedis-exp");
        try (JedisPool pool = new JedisPool(Env.host(addr), Env.port(addr)); Jedis j = pool.getResource()) {
            assertEquals("OK", j.set(key, "a", SetParams.setParams().nx().px(5_000)));
            // as in Redis, a key lives through its deadline's millisecond
            Env.advanceClock(5_000);
            assertEquals(0L, j.pttl(key));
            assertNull(j.set(key, "b", SetParams.setParams().nx().px(5_000)));
            Env.advanceClock(1);
            Env.passLockDelay(() -> j.set(key, "b", SetParams.setParams().nx().px(5_000)) == null);
            assertEquals("OK", j.set(key, "b", SetParams.setParams().nx().px(5_000)));
            assertEquals(1L, j.eval(RELEASE, List.of(key), List.of("b")));
        }
    }
}
