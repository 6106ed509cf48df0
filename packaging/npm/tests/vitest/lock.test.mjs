// The package under Vitest, through its ES module entry.
import { afterAll, beforeAll, expect, test } from "vitest";
import Redis from "ioredis";
import { startGroup, startServer } from "redlockd";

let srv;
beforeAll(async () => {
  srv = await startServer({ maxTtl: "20s" });
});
afterAll(async () => {
  await srv.close();
});

test("a lock expires when the server's clock passes its TTL", async () => {
  const r = new Redis(srv.url);
  expect(await r.set("job", "me", "PX", 10_000, "NX")).toBe("OK");
  await srv.advance(10_000);
  expect(await r.pttl("job")).toBe(0);
  await srv.advance(1);
  expect(await r.get("job")).toBeNull();
  await expect(r.set("job", "me", "PX", 20_001)).rejects.toThrow();
  r.disconnect();
});

test("a group's nodes move together", async () => {
  const c = await startGroup({ nodes: 3 });
  const rs = c.urls.map((u) => new Redis(u));
  for (const r of rs) await r.set("k", "v", "PX", 100);
  await c.advance(100);
  for (const r of rs) expect(await r.pttl("k")).toBe(0);
  await c.advance(1);
  for (const r of rs) expect(await r.exists("k")).toBe(0);
  for (const r of rs) r.disconnect();
  await c.close();
});
