package interop;

import static org.junit.jupiter.api.Assertions.*;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Seeing the locks (issue 42) with Redisson's RLock, its defaults (only the address,
 * and in the named case the client name, set): LOCKS INFO lists the lock with the
 * Redisson connection that took it. redlockd only (LOCKS).
 *
 * An RLock is a hash (field "uuid:threadId", the hold count) with a TTL. Not covered,
 * as redlockd does not do it yet: LOCKS shows the value as empty (the token is the
 * hash's field), a second client's attempt (the lock script's HEXISTS path, no SET NX)
 * is not counted in `refused`, and a late unlock is no overrun (the hash lock's token
 * is kept empty, and Redisson's unlock arguments never are).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SeeingLocksTest {
    static final String N0 = Env.node(0);

    /** LOCKS INFO's flat RESP2 array as a map. */
    static Map<String, Object> lockInfo(String key) {
        Object reply = Env.Raw.call(N0, "LOCKS", "INFO", key);
        if (reply == null) return null;
        assertInstanceOf(List.class, reply, "LOCKS INFO replied " + reply);
        List<?> kv = (List<?>) reply;
        Map<String, Object> out = new HashMap<>();
        for (int i = 0; i + 1 < kv.size(); i += 2) out.put((String) kv.get(i), kv.get(i + 1));
        return out;
    }

    /** CLIENT LIST's line for one client id, as field=value pairs. */
    static Map<String, String> clientEntry(long id) {
        for (String line : ((String) Env.Raw.call(N0, "CLIENT", "LIST")).split("\n")) {
            Map<String, String> f = new HashMap<>();
            for (String pair : line.trim().split(" ")) {
                int eq = pair.indexOf('=');
                if (eq > 0) f.put(pair.substring(0, eq), pair.substring(eq + 1));
            }
            if (Long.toString(id).equals(f.get("id"))) return f;
        }
        return null;
    }

    @Test
    void rlockIsListedWithItsRedissonConnection() throws Exception {
        Env.assumeRedlockd();
        for (String name : new String[] {null, "billing-worker-3"}) {
            Config config = new Config();
            config.useSingleServer().setAddress("redis://" + N0).setClientName(name);
            RedissonClient client = Redisson.create(config);
            try {
                String key = Env.unique("seen");
                RLock lock = client.getLock(key);
                lock.lock(); // the watchdog's 30 s lease
                try {
                    Map<String, Object> info = lockInfo(key);
                    assertNotNull(info, "LOCKS INFO found no lock at " + key);
                    assertEquals(key, info.get("key"));
                    long ttl = (Long) info.get("ttl-ms");
                    assertTrue(ttl > 25_000 && ttl <= 30_000, "ttl-ms " + ttl);
                    Map<String, String> holder = clientEntry((Long) info.get("client-id"));
                    assertNotNull(holder, "the holder's id is no connected client: " + info);
                    assertEquals(holder.get("addr"), info.get("client-addr"));
                    assertEquals(name, info.get("client-name"));
                    assertEquals(name == null ? "" : name, holder.get("name"));
                    assertEquals("default", info.get("user"));
                    assertEquals(1L, info.get("client-connected"));
                    assertEquals("", info.get("value"), "a hash lock's value is shown empty");
                } finally {
                    lock.unlock();
                }
                assertNull(lockInfo(key), "released: no lock at " + key);
            } finally {
                client.shutdown();
            }
        }
    }
}
