package interop;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.TransactionResult;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;

/** Lettuce with its defaults: RESP3 (HELLO 3) on connect, async SET NX PX, EVALSHA
 * with the NOSCRIPT fallback to EVAL, a MULTI block. No deviations. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LettuceTest {
    static RedisClient client;
    static StatefulRedisConnection<String, String> conn;
    static final String ADDR = Env.node(2);
    static final String RELEASE =
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    @BeforeAll
    static void connect() {
        client = RedisClient.create(RedisURI.create("redis://" + ADDR));
        conn = client.connect();
    }

    @AfterAll
    static void close() {
        if (conn != null) conn.close();
        if (client != null) client.shutdown();
    }

    @Test
    void speaksResp3ByDefault() {
        // Lettuce sent HELLO 3: the server says this connection speaks RESP3
        String info = conn.sync().clientInfo();
        assertTrue(List.of(info.trim().split(" ")).contains("resp=3"), info);
        assertEquals("PONG", conn.sync().ping());
    }

    @Test
    void asyncSetNxPx() throws Exception {
        RedisAsyncCommands<String, String> async = conn.async();
        String key = Env.unique("lettuce");
        assertEquals("OK", async.set(key, "t1", SetArgs.Builder.nx().px(10_000)).get(5, TimeUnit.SECONDS));
        assertNull(async.set(key, "t2", SetArgs.Builder.nx().px(10_000)).get(5, TimeUnit.SECONDS));
        long pttl = async.pttl(key).get(5, TimeUnit.SECONDS);
        assertTrue(pttl > 9_000 && pttl <= 10_000, "pttl " + pttl);
        assertEquals("t1", async.get(key).get(5, TimeUnit.SECONDS));
        assertEquals(1L, async.del(key).get(5, TimeUnit.SECONDS));
    }

    @Test
    void evalshaWithNoscriptFallback() {
        RedisCommands<String, String> sync = conn.sync();
        String key = Env.unique("lettuce-sha");
        String sha = sync.digest(RELEASE);
        assertEquals("OK", sync.scriptFlush());
        assertEquals(List.of(false), sync.scriptExists(sha));
        assertEquals("OK", sync.set(key, "mine", SetArgs.Builder.nx().px(10_000)));
        long released;
        RedisNoScriptException noscript = assertThrows(RedisNoScriptException.class,
                () -> sync.evalsha(sha, ScriptOutputType.INTEGER, new String[] {key}, "mine"));
        assertEquals("NOSCRIPT No matching script. Please use EVAL.", noscript.getMessage());
        // the fallback every Lettuce user writes: EVAL, which also caches the script
        released = sync.eval(RELEASE, ScriptOutputType.INTEGER, new String[] {key}, "mine");
        assertEquals(1L, released);
        assertEquals(List.of(true), sync.scriptExists(sha));
        assertEquals("OK", sync.set(key, "mine", SetArgs.Builder.nx().px(10_000)));
        assertEquals(0L, (Long) sync.evalsha(sha, ScriptOutputType.INTEGER, new String[] {key}, "theirs"));
        assertEquals(1L, (Long) sync.evalsha(sha, ScriptOutputType.INTEGER, new String[] {key}, "mine"));
        assertEquals(0L, sync.exists(key));
        assertEquals(sha, sync.scriptLoad(RELEASE));
    }

    @Test
    void multiBlock() {
        RedisCommands<String, String> sync = conn.sync();
        String key = Env.unique("lettuce-multi");
        assertEquals("OK", sync.multi());
        assertNull(sync.set(key, "v", SetArgs.Builder.nx().px(10_000)));
        assertNull(sync.incr(key + ":n"));
        assertNull(sync.get(key));
        TransactionResult r = sync.exec();
        assertFalse(r.wasDiscarded());
        assertEquals(List.of("OK", 1L, "v"), r.stream().toList());
        sync.del(key, key + ":n");

        // WATCH: a write from another connection discards the transaction
        StatefulRedisConnection<String, String> other = client.connect();
        try {
            assertEquals("OK", sync.watch(key));
            other.sync().set(key, "theirs");
            sync.multi();
            sync.set(key, "mine");
            assertTrue(sync.exec().wasDiscarded());
            assertEquals("theirs", sync.get(key));
        } finally {
            other.close();
            sync.del(key);
        }
    }
}
