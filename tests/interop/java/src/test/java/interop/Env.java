package interop;

import java.io.BufferedInputStream;
import java.io.File;
import java.io.FileWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Assumptions;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Where the nodes are and what kind of server they are, from the environment that
 * ../jvm_go.sh sets (the same variables as run.sh):
 * INTEROP_SERVER (redlockd | redis), INTEROP_NODES (host:port,...),
 * INTEROP_SERVER_BIN (for cases that start and kill nodes of their own),
 * INTEROP_LOG_DIR (their logs, and extra-pids for the runner's cleanup),
 * INTEROP_LOCK_DELAY_MS (the shared nodes' --lock-delay: 0 in the first pass; jvm_go.sh's
 * second pass runs the cases tagged "expiry" again on nodes with --lock-delay 5s).
 */
final class Env {
    static final String KIND = System.getenv().getOrDefault("INTEROP_SERVER", "redlockd");
    static final String BIN = System.getenv().getOrDefault("INTEROP_SERVER_BIN", "");
    static final String LOG_DIR = System.getenv().getOrDefault("INTEROP_LOG_DIR", "/tmp");
    static final List<String> NODES = parse(System.getenv().getOrDefault("INTEROP_NODES", ""));
    static final long LOCK_DELAY_MS = Long.parseLong(System.getenv().getOrDefault("INTEROP_LOCK_DELAY_MS", "0"));

    private Env() {}

    static boolean redlockd() {
        return KIND.equals("redlockd");
    }

    /** Cases that move the server's clock (DEBUG CLOCK ADVANCE) run only on redlockd. */
    static void assumeRedlockd() {
        Assumptions.assumeTrue(redlockd(), "needs redlockd's manual clock (DEBUG CLOCK)");
    }

    private static List<String> parse(String text) {
        List<String> out = new ArrayList<>();
        for (String s : text.split(",")) {
            if (!s.isBlank()) out.add(s.trim());
        }
        return out;
    }

    static String node(int i) {
        if (NODES.size() <= i) throw new IllegalStateException("INTEROP_NODES has fewer than " + (i + 1) + " nodes");
        return NODES.get(i);
    }

    static String host(String addr) {
        return addr.substring(0, addr.lastIndexOf(':'));
    }

    static int port(String addr) {
        return Integer.parseInt(addr.substring(addr.lastIndexOf(':') + 1));
    }

    static String unique(String prefix) {
        return "interop:java:" + prefix + ":" + UUID.randomUUID().toString().substring(0, 12);
    }

    /** A RedissonClient with Redisson's defaults; only the address is set. */
    static RedissonClient redisson(String addr) {
        Config config = new Config();
        config.useSingleServer().setAddress("redis://" + addr);
        return Redisson.create(config);
    }

    /** Moves the manual clock of every shared node forward by ms. */
    static void advanceClock(long ms) {
        for (String n : NODES) advanceClock(n, ms);
    }

    /** Moves the manual clock of one node forward by ms. */
    static void advanceClock(String addr, long ms) {
        Object r = Raw.call(addr, "DEBUG", "CLOCK", "ADVANCE", Long.toString(ms));
        if (!"OK".equals(r)) throw new AssertionError("DEBUG CLOCK ADVANCE on " + addr + " replied " + r);
    }

    /**
     * Call when a lock's TTL has just run out on the shared nodes (their clocks at its
     * deadline + 1 ms). With their lock-delay on (LOCK_DELAY_MS), checks that `refused`
     * holds then and in the delay's last millisecond, and moves the clocks past the
     * delay; with it off (Redis, and the first pass) does nothing.
     */
    static void passLockDelay(java.util.function.BooleanSupplier refused) {
        if (LOCK_DELAY_MS == 0) return;
        if (!redlockd()) throw new IllegalStateException("INTEROP_LOCK_DELAY_MS is redlockd's --lock-delay; Redis has none");
        if (!refused.getAsBoolean()) throw new AssertionError("the expired lock was granted at once, during the lock-delay");
        advanceClock(LOCK_DELAY_MS - 1);
        if (!refused.getAsBoolean()) throw new AssertionError("the expired lock was granted in the lock-delay's last millisecond");
        advanceClock(1);
    }

    /**
     * Whether some client on one of these servers is subscribed to a channel whose name
     * contains `part` (plain or sharded Pub/Sub): how a test knows that a client
     * library's waiter is waiting, instead of sleeping and hoping it is.
     */
    static boolean subscribed(String part, String... addrs) {
        for (String addr : addrs) {
            for (String kind : new String[] {"CHANNELS", "SHARDCHANNELS"}) {
                Object chans = Raw.call(addr, "PUBSUB", kind, "*" + part + "*");
                if (chans instanceof List && !((List<?>) chans).isEmpty()) return true;
            }
        }
        return false;
    }

    /** Polls cond every 5 ms until it holds or timeoutMs passes. */
    static boolean waitFor(long timeoutMs, java.util.function.BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (System.nanoTime() < end) {
            if (cond.getAsBoolean()) return true;
            Thread.sleep(5);
        }
        return cond.getAsBoolean();
    }

    /** A minimal RESP2 client for the checks (PTTL, HGET, DEBUG): one connection per call. */
    static final class Raw {
        static Object call(String addr, String... args) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(host(addr), port(addr)), 2000);
                s.setSoTimeout(5000);
                OutputStream out = s.getOutputStream();
                StringBuilder sb = new StringBuilder("*").append(args.length).append("\r\n");
                for (String a : args) {
                    byte[] b = a.getBytes(StandardCharsets.UTF_8);
                    sb.append('$').append(b.length).append("\r\n").append(a).append("\r\n");
                }
                out.write(sb.toString().getBytes(StandardCharsets.UTF_8));
                out.flush();
                return read(new BufferedInputStream(s.getInputStream()));
            } catch (IOException e) {
                throw new RuntimeException("raw call to " + addr + " failed: " + e, e);
            }
        }

        private static String line(InputStream in) throws IOException {
            StringBuilder sb = new StringBuilder();
            int c;
            while ((c = in.read()) != -1) {
                if (c == '\r') {
                    in.read();
                    break;
                }
                sb.append((char) c);
            }
            return sb.toString();
        }

        private static Object read(InputStream in) throws IOException {
            int t = in.read();
            String l = line(in);
            switch (t) {
                case '+': return l;
                case '-': return new RuntimeException(l);
                case ':': return Long.parseLong(l);
                case '$': {
                    int n = Integer.parseInt(l);
                    if (n < 0) return null;
                    byte[] b = in.readNBytes(n);
                    in.readNBytes(2);
                    return new String(b, StandardCharsets.UTF_8);
                }
                case '*': {
                    int n = Integer.parseInt(l);
                    if (n < 0) return null;
                    List<Object> out = new ArrayList<>();
                    for (int i = 0; i < n; i++) out.add(read(in));
                    return out;
                }
                default: throw new IOException("unexpected reply type " + (char) t + l);
            }
        }

        static long pttl(String addr, String key) {
            return (Long) call(addr, "PTTL", key);
        }
    }

    /** A server process of the kind under test, started and stopped by one case. */
    static final class Node implements AutoCloseable {
        final int port;
        final String addr;
        private final Process proc;

        Node() throws IOException, InterruptedException {
            this(freePort(), List.of());
        }

        /** A node on a free port, with extra flags after the usual ones. */
        Node(List<String> extra) throws IOException, InterruptedException {
            this(freePort(), extra);
        }

        /** A node on port, with extra flags after the usual ones (a cluster node's). */
        Node(int port, List<String> extra) throws IOException, InterruptedException {
            this(port, usualFlags(port, extra).toArray(new String[0]));
        }

        private static List<String> usualFlags(int port, List<String> extra) {
            List<String> flags = new ArrayList<>();
            if (redlockd()) {
                flags.addAll(List.of("--max-ttl", "30s", "--restart-delay", "0", "--clock", "manual",
                        "--enable-debug-command", "--dir", LOG_DIR + "/java-dir-" + port));
            } else {
                flags.addAll(List.of("--save", "", "--appendonly", "no", "--daemonize", "no"));
            }
            flags.addAll(extra);
            return flags;
        }

        /**
         * A node whose acknowledged writes survive a crash, on port with its data in dir
         * (started again on the same port and dir after kill()). redlockd: its default
         * flags and nothing else (the caller declares a fresh dir with `redlockd init`);
         * redis-server: appendonly yes, appendfsync always.
         */
        static Node durable(int port, String dir) throws IOException, InterruptedException {
            if (redlockd()) return new Node(port, new String[] {"--dir", dir});
            return new Node(port, new String[] {"--dir", dir, "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--daemonize", "no"});
        }

        /** A free port on 127.0.0.1. */
        static int freePort() throws IOException {
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getByName("127.0.0.1"))) {
                return s.getLocalPort();
            }
        }

        /** A node on port with exactly these flags. */
        private Node(int port, String[] flags) throws IOException, InterruptedException {
            if (BIN.isEmpty()) throw new IllegalStateException("INTEROP_SERVER_BIN is not set (run through jvm_go.sh)");
            this.port = port;
            addr = "127.0.0.1:" + port;
            List<String> cmd = new ArrayList<>(List.of(BIN, "--bind", "127.0.0.1", "--port", Integer.toString(port)));
            cmd.addAll(List.of(flags));
            ProcessBuilder pb = new ProcessBuilder(cmd);
            pb.environment().put("NO_COLOR", "1");
            pb.redirectErrorStream(true);
            pb.redirectOutput(ProcessBuilder.Redirect.appendTo(new File(LOG_DIR, "java-node-" + port + ".log")));
            pb.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
            proc = pb.start();
            try (FileWriter w = new FileWriter(new File(LOG_DIR, "extra-pids"), true)) {
                w.write(proc.pid() + "\n");
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
            while (true) {
                if (!proc.isAlive()) throw new IOException("server on " + port + " exited: " + proc.exitValue());
                try {
                    if ("PONG".equals(Raw.call(addr, "PING"))) break;
                } catch (RuntimeException e) {
                    if (System.nanoTime() > end) throw new IOException("server on " + port + " did not answer PING", e);
                }
                Thread.sleep(5);
            }
        }

        /** SIGKILL: the node vanishes as a crashed machine would. */
        void kill() throws InterruptedException {
            proc.destroyForcibly();
            proc.waitFor(5, TimeUnit.SECONDS);
        }

        @Override
        public void close() throws InterruptedException {
            if (proc.isAlive()) {
                proc.destroy();
                if (!proc.waitFor(5, TimeUnit.SECONDS)) kill();
            }
        }
    }
}
