package interop;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * A `redlockd harness` process (docs/testing.md, "The control protocol"): N nodes on one
 * manual clock, driven by JSON lines over its stdin; one reply line per request on its
 * stdout. Closing it closes stdin, which stops the harness and its nodes.
 */
final class Harness implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    final List<String> addrs = new ArrayList<>();
    private final Process proc;
    private final Writer in;
    private final BufferedReader out;
    private int id;

    Harness(int nodes) throws IOException {
        if (Env.BIN.isEmpty()) throw new IllegalStateException("INTEROP_SERVER_BIN is not set (run through jvm_go.sh)");
        ProcessBuilder pb = new ProcessBuilder(Env.BIN, "harness", "--nodes", Integer.toString(nodes));
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        proc = pb.start();
        in = new OutputStreamWriter(proc.getOutputStream(), StandardCharsets.UTF_8);
        out = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        JsonNode ready = line == null ? null : JSON.readTree(line);
        if (ready == null || !ready.path("ready").asBoolean()) {
            close();
            throw new IOException("harness not ready: " + line);
        }
        for (JsonNode n : ready.get("nodes")) addrs.add(n.get("addr").asText());
    }

    /** Sends one request (op and its fields, in pairs) and returns its "ok" value; an error reply throws. */
    synchronized JsonNode call(String op, Object... fields) throws IOException {
        Map<String, Object> req = new LinkedHashMap<>();
        req.put("id", ++id);
        req.put("op", op);
        for (int i = 0; i < fields.length; i += 2) req.put((String) fields[i], fields[i + 1]);
        String line = JSON.writeValueAsString(req);
        in.write(line + "\n");
        in.flush();
        String reply = out.readLine();
        if (reply == null) throw new IOException("harness gone after " + line);
        JsonNode r = JSON.readTree(reply);
        if (r.has("error")) throw new IOException(line + ": " + r.get("error").asText());
        return r.get("ok");
    }

    /** Moves the shared manual clock forward by ms. */
    void advance(long ms) throws IOException {
        call("advance", "ms", ms);
    }

    @Override
    public void close() {
        try {
            in.close();
        } catch (IOException e) {
            // the harness is gone already
        }
        try {
            if (!proc.waitFor(10, TimeUnit.SECONDS)) {
                proc.destroyForcibly();
                proc.waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            proc.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
