package interop;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.sync.RedisAdvancedClusterCommands;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.ClusterPipeline;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.exceptions.JedisClusterOperationException;
import redis.clients.jedis.params.SetParams;

/**
 * JedisCluster, Lettuce's RedisClusterClient and Redisson in cluster mode (RLock), with
 * their defaults and one seed address, against a cluster of 3 nodes the class starts:
 * redlockd nodes in --cluster-mode map given a map by CLUSTER SETMAP, or, against
 * redis-server, a real Redis Cluster (--cluster-enabled yes, redis-cli --cluster
 * create), so the cases can fail against Redis too.
 *
 * redissonWatchdogLockAcrossALiveSlotMove runs on redlockd only (a live move is
 * `redlockd slots move`; moving a slot of a Redis Cluster is MIGRATE with ASK
 * redirections, which this battery does not set up). Both clients run with every
 * default: the holder's watchdog renews its 30 s lease every 10 s of real time, so the
 * case waits up to one renewal after the move.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClusterTest {
    static final List<Env.Node> NODES = new ArrayList<>();
    static String seed;

    /** A free port below the ephemeral range whose port + 10000 (Redis's bus) is free. */
    static int clusterPort() throws Exception {
        java.util.Random r = new java.util.Random();
        for (int i = 0; i < 200; i++) {
            int p = 20000 + r.nextInt(10000);
            try (var a = new java.net.ServerSocket(p, 1, java.net.InetAddress.getByName("127.0.0.1"));
                 var b = new java.net.ServerSocket(p + 10000, 1, java.net.InetAddress.getByName("127.0.0.1"))) {
                return p;
            } catch (java.io.IOException busy) {
                // next
            }
        }
        throw new IllegalStateException("no free port pair");
    }

    @BeforeAll
    static void startCluster() throws Exception {
        for (int i = 0; i < 3; i++) {
            int port = clusterPort();
            List<String> extra = Env.redlockd()
                    ? List.of("--cluster-mode", "map", "--cluster-node-id", String.format("%040x", i + 1))
                    : List.of("--cluster-enabled", "yes", "--cluster-config-file", Env.LOG_DIR + "/java-cluster-" + port + ".conf");
            NODES.add(new Env.Node(port, extra));
        }
        seed = NODES.get(0).addr;
        if (Env.redlockd()) {
            List<String> entries = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                entries.add(String.format("{\"id\":\"%040x\",\"host\":\"127.0.0.1\",\"port\":%d,\"slots\":[[%d,%d]]}",
                        i + 1, NODES.get(i).port, 16384 * i / 3, 16384 * (i + 1) / 3 - 1));
            }
            String map = "{\"version\":1,\"nodes\":[" + String.join(",", entries) + "]}";
            for (Env.Node n : NODES) assertEquals("OK", Env.Raw.call(n.addr, "CLUSTER", "SETMAP", map));
        } else {
            List<String> cmd = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
            for (Env.Node n : NODES) cmd.add(n.addr);
            cmd.add("--cluster-yes");
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
                    .redirectOutput(new java.io.File(Env.LOG_DIR, "java-cluster-create.log")).start();
            assertTrue(p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0, "redis-cli --cluster create");
        }
        for (Env.Node n : NODES) {
            assertTrue(Env.waitFor(30000, () -> {
                Object info = Env.Raw.call(n.addr, "CLUSTER", "INFO");
                Object slots = Env.Raw.call(n.addr, "CLUSTER", "SLOTS");
                return String.valueOf(info).contains("cluster_state:ok") && slots instanceof List<?> l && l.size() == 3;
            }), n.addr + " reaches cluster_state:ok");
        }
    }

    @AfterAll
    static void stopCluster() throws Exception {
        for (Env.Node n : NODES) n.close();
    }

    static long dbsize(Env.Node n) {
        return (Long) Env.Raw.call(n.addr, "DBSIZE");
    }

    @Test
    void jedisClusterSpreadsKeysPipelinesATagAndRefusesCrossSlot() {
        try (JedisCluster c = new JedisCluster(Set.of(new HostAndPort(Env.host(seed), Env.port(seed))))) {
            String prefix = Env.unique("jedis-cluster");
            for (int i = 0; i < 150; i++) {
                String k = prefix + ":" + i;
                assertEquals("OK", c.set(k, "v", SetParams.setParams().nx().px(30000)));
                assertNull(c.set(k, "w", SetParams.setParams().nx().px(30000)), k + " granted twice");
                assertEquals("v", c.get(k));
            }
            for (Env.Node n : NODES) assertTrue(dbsize(n) >= 20, n.addr + " holds keys");
            String tag = "{" + prefix + ":order}";
            // JedisCluster has no transactions (UnsupportedOperationException); its
            // pipeline sends a hash tag's commands to the tag's node.
            try (ClusterPipeline p = c.pipelined()) {
                var set = p.set(tag + ":lock", "me", SetParams.setParams().nx().px(10000));
                var incr = p.incr(tag + ":fence");
                p.sync();
                assertEquals("OK", set.get());
                assertEquals(1L, incr.get());
            }
            // Jedis refuses keys of several slots itself; the server's own refusal is
            // CROSSSLOT, on any node.
            var e = assertThrows(JedisClusterOperationException.class,
                    () -> c.eval("return 1", List.of(tag + ":a", prefix + ":elsewhere"), List.of()));
            assertEquals("Cannot get connection for command with multiple hash slots", e.getMessage());
            for (Env.Node n : NODES) {
                Object r = Env.Raw.call(n.addr, "EVAL", "return 1", "2", tag + ":a", prefix + ":elsewhere");
                assertEquals("CROSSSLOT Keys in request don't hash to the same slot",
                        r instanceof RuntimeException x ? x.getMessage() : String.valueOf(r));
            }
        }
    }

    @Test
    void lettuceClusterClientSpreadsKeysAndRefusesCrossSlot() {
        RedisClusterClient client = RedisClusterClient.create(RedisURI.create("redis://" + seed));
        try (StatefulRedisClusterConnection<String, String> conn = client.connect()) {
            RedisAdvancedClusterCommands<String, String> c = conn.sync();
            assertEquals(3, conn.getPartitions().size(), "3 masters from CLUSTER NODES");
            String prefix = Env.unique("lettuce-cluster");
            for (int i = 0; i < 150; i++) {
                String k = prefix + ":" + i;
                assertEquals("OK", c.set(k, "v", SetArgs.Builder.nx().px(30000)));
                assertNull(c.set(k, "w", SetArgs.Builder.nx().px(30000)), k + " granted twice");
            }
            for (Env.Node n : NODES) assertTrue(dbsize(n) >= 20, n.addr + " holds keys");
            Exception e = assertThrows(Exception.class, () -> c.eval("return 1", io.lettuce.core.ScriptOutputType.INTEGER,
                    "{" + prefix + "}:a", prefix + ":elsewhere"));
            assertTrue(String.valueOf(e.getMessage()).contains("CROSSSLOT"), String.valueOf(e.getMessage()));
        } finally {
            client.shutdown();
        }
    }

    @Test
    void redissonClusterModeRLock() throws Exception {
        Config config = new Config();
        config.useClusterServers().addNodeAddress("redis://" + seed);
        RedissonClient a = Redisson.create(config);
        RedissonClient b = Redisson.create(config);
        try {
            String name = Env.unique("redisson-cluster-lock");
            RLock lock = a.getLock(name);
            assertTrue(lock.tryLock(5, 30, TimeUnit.SECONDS));
            assertTrue(lock.isLocked());
            // Another client (another thread id) is refused while it is held.
            assertFalse(b.getLock(name).tryLock(0, 30, TimeUnit.SECONDS));
            lock.unlock();
            assertFalse(lock.isLocked());
            // The watchdog's lock (no lease time) and a waiter woken by the unlock message.
            RLock watched = a.getLock(name);
            watched.lock();
            var waiter = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                try {
                    return b.getLock(name).tryLock(20, 30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    return false;
                }
            });
            String[] addrs = NODES.stream().map(n -> n.addr).toArray(String[]::new);
            assertTrue(Env.waitFor(5000, () -> Env.subscribed(name, addrs)), "the waiter never subscribed");
            watched.unlock();
            assertTrue(waiter.get(25, TimeUnit.SECONDS), "the waiter gets the lock after the unlock");
        } finally {
            a.shutdown();
            b.shutdown();
        }
    }

    /** The node of NODES whose keyspace has `key` (TYPE is not none; MOVED elsewhere). */
    static String holderOf(String key) {
        String found = null;
        for (Env.Node n : NODES) {
            Object type = Env.Raw.call(n.addr, "TYPE", key);
            if (type instanceof String t && !t.equals("none")) {
                assertNull(found, key + " on two nodes: " + found + " and " + n.addr);
                found = n.addr;
            }
        }
        return found;
    }

    /**
     * A Redisson RLock taken with lock() (the watchdog's lease) held while `redlockd slots
     * move` moves its slot to another node: the lock's hash arrives with its holder field,
     * the old owner answers MOVED, the watchdog's renewals land on the new owner (its
     * manual clock moved 2.5 s, twice, and each time the lease is renewed to the full
     * 3 s there), a second client's tryLock(0, ...) is refused before, during and after the
     * move, and unlock() frees the key on the new owner with nothing left of the slot on
     * the old one. With a move that sends no key, the renewal finds no hash (the watchdog
     * stops), the contender takes the lock and the holder check fails.
     */
    @Test
    void redissonWatchdogLockAcrossALiveSlotMove() throws Exception {
        Assumptions.assumeTrue(Env.redlockd(), "a live slot move is redlockd's `slots move` (see the class comment)");
        Config holderConfig = new Config();
        holderConfig.useClusterServers().addNodeAddress("redis://" + seed);
        Config contenderConfig = new Config();
        contenderConfig.useClusterServers().addNodeAddress("redis://" + seed);
        RedissonClient a = Redisson.create(holderConfig);
        RedissonClient b = Redisson.create(contenderConfig);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger tries = new AtomicInteger();
        AtomicInteger granted = new AtomicInteger();
        Thread contender = null;
        try {
            String name = Env.unique("redisson-cluster-moving");
            RLock lock = a.getLock(name);
            lock.lock();
            String old = holderOf(name);
            assertNotNull(old, "no node has the lock's hash");
            assertEquals("hash", Env.Raw.call(old, "TYPE", name));
            String field = Env.Raw.call(old, "HKEYS", name).toString();
            long slot = (Long) Env.Raw.call(old, "CLUSTER", "KEYSLOT", name);
            // Other cases' keys may share the slot (their TTLs do not run on the manual clock).
            long inSlot = (Long) Env.Raw.call(old, "CLUSTER", "COUNTKEYSINSLOT", Long.toString(slot));
            String to = NODES.stream().map(n -> n.addr).filter(x -> !x.equals(old)).findFirst().orElseThrow();

            // The contender tries without waiting, over and over, until the unlock.
            RLock theirs = b.getLock(name);
            contender = new Thread(() -> {
                while (!stop.get()) {
                    tries.incrementAndGet();
                    try {
                        if (theirs.tryLock(0, 30, TimeUnit.SECONDS)) {
                            granted.incrementAndGet();
                            theirs.unlock();
                        }
                    } catch (Exception e) {
                        // an error is not a grant (a reply lost in the pause, a redirect)
                    }
                }
            });
            contender.start();
            assertTrue(Env.waitFor(5000, () -> tries.get() >= 3), "the contender never tried");

            Process p = new ProcessBuilder(Env.BIN, "slots", "move", "--slots", Long.toString(slot), "--to", to, "--seed", old)
                    .redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "slots move did not finish");
            assertEquals(0, p.exitValue(), out);
            int triesAtMove = tries.get();

            // The old owner sends clients on; the holder still holds (HEXISTS through the
            // client, which follows MOVED); the new owner has the hash with its field.
            Object moved = Env.Raw.call(old, "HKEYS", name);
            assertTrue(moved instanceof RuntimeException e && e.getMessage().equals("MOVED " + slot + " " + to), String.valueOf(moved));
            assertTrue(lock.isHeldByCurrentThread(), "the holder lost its lock in the move");
            assertEquals(to, holderOf(name));
            assertEquals(field, Env.Raw.call(to, "HKEYS", name).toString());

            // The watchdog renews on the new owner: 15 s of its server time pass (the lease
            // had 20-30 s left: a renewal is at most 10 s old), and within one renewal
            // period of real time the lease is back above 15 s.
            Env.advanceClock(to, 15000);
            assertTrue(Env.waitFor(12000, () -> Env.Raw.pttl(to, name) > 15000),
                    "no watchdog renewal on the new owner: pttl " + Env.Raw.pttl(to, name));
            assertTrue(lock.isHeldByCurrentThread());
            assertTrue(Env.waitFor(5000, () -> tries.get() >= triesAtMove + 3), "the contender stopped trying after the move");
            stop.set(true);
            contender.join(10000);
            assertEquals(0, granted.get(), "the contender was granted the held lock (" + tries.get() + " tries)");
            assertFalse(b.getLock(name).tryLock(0, 30, TimeUnit.SECONDS));

            lock.unlock();
            assertEquals(0L, Env.Raw.call(to, "EXISTS", name));
            assertEquals(0L, Env.Raw.call(old, "CLUSTER", "COUNTKEYSINSLOT", Long.toString(slot)));
            assertNull(holderOf(name));
            assertTrue(theirs.tryLock(0, 30, TimeUnit.SECONDS), "the contender gets the lock after the unlock");
            assertEquals(to, holderOf(name));
            theirs.unlock();
            // The move's report, last: the clients' view above is what the case is about.
            assertTrue(out.contains("moved slots " + slot + " from " + old + " to " + to), out);
            assertTrue(out.contains(": " + inSlot + " keys"), out);
        } finally {
            stop.set(true);
            if (contender != null) contender.join(10000);
            a.shutdown();
            b.shutdown();
        }
    }
}
